// root.mjs - root where the operator gave E2B's base template one
// (root_templates = nanobox), driven by the official E2B SDK (npm e2b,
// pinned in package.json) as an agent's code would: `sudo` and
// `user: 'root'` run as uid 0 with no capabilities, a package installed
// with `sudo apt-get install` runs for the user, the user stays the user.
// tests/integration/test_e2b.py runs it and asserts on the JSON summary
// it prints as its last line: one entry per step, {"thrown": ...} when
// the SDK threw.
//
//   node root.mjs --tag <unique tag>
//
// Its sandbox carries metadata {suite: tag}; it kills it before it exits.
import { Sandbox } from 'e2b'
import { suite } from './steps.mjs'

const args = process.argv.slice(2)
const tag = args[args.indexOf('--tag') + 1]
const { created, summary, step } = suite((e) => errInfo(e))

const errInfo = (e) => ({
  name: e?.constructor?.name, message: String(e?.message ?? e),
  ...(e?.exitCode !== undefined && { exitCode: e.exitCode, stdout: e.stdout, stderr: e.stderr }),
})
const out = async (p) => (await p).stdout
const CAPS = 'grep -E "^(Uid|CapEff|CapBnd|NoNewPrivs)" /proc/self/status'

const sbx = await Sandbox.create({ metadata: { suite: tag }, timeoutMs: 120_000 })
created.push(sbx.sandboxId)
const cmds = sbx.commands

await step('asRoot', async () => ({ stdout: await out(cmds.run('whoami; id -u; echo "$HOME"; pwd', { user: 'root' })) }))
await step('rootCaps', async () => ({ stdout: await out(cmds.run(CAPS, { user: 'root' })) }))
await step('sudo', async () => ({ stdout: await out(cmds.run('sudo id -u; sudo ' + CAPS)) }))
await step('user', async () => ({ stdout: await out(cmds.run('id -u; whoami')) }))
await step('sudoInstall', async () => {
  await sbx.files.write('/tmp/pkg/DEBIAN/control',
    'Package: nbhello\nVersion: 1.0\nArchitecture: all\nMaintainer: nanobox tests <t@localhost>\nDescription: hello\n')
  await sbx.files.write('/tmp/pkg/usr/bin/nbhello', '#!/bin/sh\necho hello from a package\n')
  await cmds.run('chmod 0755 /tmp/pkg/usr/bin/nbhello && dpkg-deb --root-owner-group --build /tmp/pkg /tmp/nbhello.deb')
  const install = await cmds.run('sudo apt-get install -y ./nbhello.deb', { cwd: '/tmp', timeoutMs: 120_000 })
  return { exitCode: install.exitCode, run: await out(cmds.run('nbhello')) }
})
await step('sudoTee', async () => ({ stdout: await out(cmds.run('echo hi | sudo tee /etc/nb-root-test >/dev/null && cat /etc/nb-root-test')) }))
await step('rootBackgroundKill', async () => {
  const h = await cmds.run('sleep 60', { background: true, user: 'root' })
  const owner = await out(cmds.run(`ps -o user= -p ${h.pid}`))
  const killed = await h.kill()
  // a killed process is gone once the kernel has ended it and its parent
  // reaped it: on a loaded machine that may come after the next command
  // starts, so look again for a while (one that lives on stays "alive")
  let left
  for (const end = Date.now() + 10_000; ; await new Promise((resolve) => setTimeout(resolve, 50))) {
    left = await out(cmds.run(`ps -p ${h.pid} >/dev/null && echo alive || echo gone`))
    if (left === 'gone\n' || Date.now() > end) break
  }
  return { owner, killed, left }
})

// what root made and the user may not search, and PID 1's (the agent's)
// magic links: a symlink's target never shows more than the user may
// resolve (the link's own path); files.write where only root could write
// is refused, root's directory not made for the user
await step('rootLinkTargets', async () => {
  await cmds.run('sudo mkdir -m 700 /opt/nbsecret && echo s | sudo tee /opt/nbsecret/s >/dev/null')
  await cmds.run('mkdir -p rl && cd rl && ln -s /opt/nbsecret/s shut && ln -s /proc/1/cwd p1cwd' +
    ' && ln -s /proc/1/root/etc p1root && ln -s /etc/passwd abs')
  const info = {}
  for (const n of ['shut', 'p1cwd', 'p1root', 'abs']) info[n] = (await sbx.files.getInfo(`rl/${n}`)).symlinkTarget
  let write
  try {
    write = { returned: await sbx.files.write('/0/x', 'x') }
  } catch (e) {
    write = errInfo(e)
  }
  return { info, write, zero: await sbx.files.exists('/0') }
})

// a root terminal, kept in the background: connect follows it again
await step('rootPty', async () => {
  let text = ''
  let again = ''
  const dec = new TextDecoder()
  const until = async (get, re) => {
    for (const end = Date.now() + 10_000; Date.now() < end; await new Promise((resolve) => setTimeout(resolve, 50))) {
      if (re.test(get())) return true
    }
    return false
  }
  const t = await sbx.pty.create({ cols: 80, rows: 24, user: 'root', onData: (d) => { text += dec.decode(d, { stream: true }) } })
  await sbx.pty.sendInput(t.pid, new TextEncoder().encode('id -u\n'))
  const uid0 = await until(() => text, /[\r\n]0\r\n/)
  await t.disconnect()
  await sbx.pty.connect(t.pid, { onData: (d) => { again += dec.decode(d, { stream: true }) } })
  await sbx.pty.sendInput(t.pid, new TextEncoder().encode('whoami\n'))
  const whoami = await until(() => again, /[\r\n]root\r\n/)
  return { uid0, whoami, killed: await sbx.pty.kill(t.pid) }
})

for (const id of created) await Sandbox.kill(id).catch(() => {})
console.log(JSON.stringify(summary))
