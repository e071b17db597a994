// commands.mjs - the E2B facade's process.Process service (Connect-RPC),
// driven by the official E2B SDK (npm e2b, pinned in package.json) through
// sbx.commands exactly as a user's code would, pointed at nanobox by
// E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY=e2b_<key> alone.
// tests/integration/test_e2b.py runs it and asserts on the JSON summary it
// prints as its last line: one entry per step, {"thrown": ...} when the SDK
// threw where it should not have.
//
//   node commands.mjs --tag <unique tag>
//
// Its sandbox carries metadata {suite: tag}; it kills it before it exits.
import { Sandbox } from 'e2b'
import { suite } from './steps.mjs'

const args = process.argv.slice(2)
const tag = args[args.indexOf('--tag') + 1]
const { steps, created, summary, step, throws } = suite((e) => errInfo(e))

const errInfo = (e) => ({
  name: e?.constructor?.name, message: String(e?.message ?? e),
  ...(e?.exitCode !== undefined && { exitCode: e.exitCode, stdout: e.stdout, stderr: e.stderr }),
})
const result = (r) => ({ stdout: r.stdout, stderr: r.stderr, exitCode: r.exitCode, error: r.error ?? null })
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

const sbx = await Sandbox.create({ metadata: { suite: tag }, envs: { FROM_CREATE: 'sandbox-wide' }, timeoutMs: 300_000 })
created.push(sbx.sandboxId)
const cmds = sbx.commands

await step('echo', async () => result(await cmds.run('echo hi')))
await step('stderr', async () => result(await cmds.run('echo out; echo oops >&2')))
await throws('exitCode', () => cmds.run('echo partial; exit 3'))
await step('envsAndCwd', async () =>
  result(await cmds.run('echo "$ONE|$FROM_CREATE"; pwd', { envs: { ONE: 'per command' }, cwd: '/tmp' })))
await step('envsDoNotLeak', async () => result(await cmds.run('echo "[$ONE]"')))
// stdin is closed unless asked for (the SDK's default, stdin: false): cat ends at once
await step('stdinClosedByDefault', async () => result(await cmds.run('cat; echo ended')))
await step('streamedCallbacks', async () => {
  const chunks = []
  const r = await cmds.run('for i in 1 2 3; do echo line$i; sleep 0.3; done',
    { onStdout: (d) => chunks.push(d) })
  return { ...result(r), chunks }
})
await step('bigOutput', async () => {
  const r = await cmds.run("head -c 300000 /dev/zero | tr '\\0' a; printf 'é€'")
  return { length: r.stdout.length, tail: r.stdout.slice(-4), allA: /^a+é€$/.test(r.stdout) }
})
await throws('timeout', async () => {
  const t0 = Date.now()
  try {
    await cmds.run('sleep 20', { timeoutMs: 1500 })
  } finally {
    steps.timeoutElapsedMs = Date.now() - t0
  }
})
// the agent killed it at the timeout: it is no longer listed
await step('timeoutKilled', async () => {
  await sleep(1000)
  return { sleeps: (await cmds.list()).filter((p) => p.args.includes('sleep 20')).length }
})

await step('backgroundKill', async () => {
  const h = await cmds.run('sleep 60', { background: true })
  const listed = (await cmds.list()).find((p) => p.pid === h.pid)
  const killed = await h.kill()
  let waited
  try {
    waited = { returned: result(await h.wait()) }
  } catch (e) {
    waited = errInfo(e)
  }
  return { pid: h.pid, listed: listed ?? null, killed, waited, killAgain: await cmds.kill(h.pid) }
})
await step('stdin', async () => {
  const h = await cmds.run('cat; echo "[eof]"', { background: true, stdin: true })
  await h.sendStdin('hello ')
  await cmds.sendStdin(h.pid, 'world\n')
  await h.closeStdin()
  return result(await h.wait())
})
await step('connect', async () => {
  const h = await cmds.run('sleep 1.5; echo done; exit 4', { background: true })
  await h.disconnect()
  const again = await cmds.connect(h.pid)
  let waited
  try {
    waited = { returned: result(await again.wait()) }
  } catch (e) {
    waited = errInfo(e)
  }
  return { samePid: again.pid === h.pid, waited }
})
await throws('connectUnknown', () => cmds.connect(999_999))
await step('killUnknown', async () => ({ killed: await cmds.kill(999_999) }))
await throws('sendStdinUnknown', () => cmds.sendStdin(999_999, 'x'))

// the data plane takes the sandbox's envdAccessToken, nothing else
const opts = { sandboxId: sbx.sandboxId, envdVersion: '0.5.6' }
await throws('wrongToken', () => new Sandbox({ ...opts, envdAccessToken: 'f'.repeat(64) }).commands.run('echo no'))
await throws('noToken', () => new Sandbox({ ...opts }).commands.list())
await step('rightTokenByConnect', async () => {
  const again = await Sandbox.connect(sbx.sandboxId)
  return result(await again.commands.run('echo again'))
})

await step('killedSandbox', async () => {
  const h = await cmds.run('sleep 60', { background: true })
  await sbx.kill()
  let waited
  try {
    waited = { returned: result(await h.wait()) }
  } catch (e) {
    waited = errInfo(e)
  }
  return { waited }
})
await throws('runOnKilledSandbox', () => cmds.run('echo late'))

for (const id of created) await Sandbox.kill(id).catch(() => {})
console.log(JSON.stringify(summary))
