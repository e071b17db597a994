// pty.mjs - sbx.pty through the E2B facade's process.Process (Start with
// pty, Connect to a PTY, List, SendInput's input.pty, Update, SendSignal), driven by the official
// E2B SDK (npm e2b, pinned in package.json) as a user's code would, pointed
// at nanobox by E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY=e2b_<key>.
// tests/integration/test_e2b.py runs it and asserts on the JSON summary it
// prints as its last line: one entry per step, {"thrown": ...} when the SDK
// threw where it should not have.
//
//   node pty.mjs --tag <unique tag>
//
// Its sandbox carries metadata {suite: tag}; it kills it before it exits.
import { Sandbox } from 'e2b'
import { suite } from './steps.mjs'

const args = process.argv.slice(2)
const tag = args[args.indexOf('--tag') + 1]
const { steps, created, summary, step, throws } = suite((e) => errInfo(e))

const errInfo = (e) => ({
  name: e?.constructor?.name, message: String(e?.message ?? e),
  ...(e?.exitCode !== undefined && { exitCode: e.exitCode }),
})
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const enc = new TextEncoder()

// A terminal: its output as text so far, and a wait for a pattern in it.
async function terminal (opts = {}) {
  const t = { text: '' }
  const dec = new TextDecoder()
  t.handle = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => { t.text += dec.decode(d, { stream: true }) }, ...opts })
  t.type = (s) => sbx.pty.sendInput(t.handle.pid, enc.encode(s))
  t.until = async (re, ms = 10_000) => {
    for (const end = Date.now() + ms; Date.now() < end; await sleep(50)) {
      if (re.test(t.text)) return true
    }
    return false
  }
  return t
}

// wait() as the SDK gives it: the result, or what it threw (a non-zero exit is CommandExitError)
async function waited (handle) {
  try {
    const r = await handle.wait()
    return { exitCode: r.exitCode }
  } catch (e) {
    return errInfo(e)
  }
}

const sbx = await Sandbox.create({ metadata: { suite: tag }, timeoutMs: 300_000 })
created.push(sbx.sandboxId)

await step('echo', async () => {
  const t = await terminal({ envs: { FROM_PTY: 'yes' }, cwd: '/tmp' })
  await t.type('echo $((6*7)) "$TERM" "$FROM_PTY" "$(pwd)" "$(tty)"\n')
  const seen = await t.until(/[\r\n]42 \S+ yes \/tmp \/dev\/pts\/\d+\r\n/)
  await t.type('stty size\n')
  const size = await t.until(/[\r\n]24 80\r\n/)
  await sbx.pty.resize(t.handle.pid, { cols: 100, rows: 30 })
  await t.type('stty size\n')
  const resized = await t.until(/[\r\n]30 100\r\n/)
  const listed = (await sbx.commands.list()).some((p) => p.pid === t.handle.pid)
  const line = t.text.match(/[\r\n](42 [^\r]*)\r\n/)
  await t.type('exit 3\n')
  const w = await waited(t.handle)
  return { pid: t.handle.pid, seen, line: line && line[1], size, resized, listed, waited: w, tail: t.text.slice(-600) }
})

await step('exitZero', async () => {
  const t = await terminal()
  await t.type('exit\n')
  return { waited: await waited(t.handle) }
})

await step('kill', async () => {
  const t = await terminal()
  await t.type('echo ready\n')
  const ready = await t.until(/[\r\n]ready\r\n/)
  const killed = await sbx.pty.kill(t.handle.pid)
  const w = await waited(t.handle)
  return { ready, killed, waited: w, killedAgain: await sbx.pty.kill(t.handle.pid) }
})

// ^C reaches the foreground job through the terminal's line discipline
await step('interrupt', async () => {
  const t = await terminal()
  await t.type('sleep 30; echo after\n')
  await sleep(500)
  await t.type('\x03echo back\n')
  const back = await t.until(/[\r\n]back\r\n/)
  await t.handle.kill()
  return { back, after: /[\r\n]after\r\n/.test(t.text) }
})

// a terminal outlives its handle: pty.connect streams its output again, from then on
await step('reconnect', async () => {
  const t = await terminal()
  await t.type('echo hi\n')
  const hi = await t.until(/[\r\n]hi\r\n/)
  await t.handle.disconnect()
  await t.type('echo while-away\n')
  await sleep(500)
  const c = { text: '' }
  const dec = new TextDecoder()
  const handle = await sbx.pty.connect(t.handle.pid, { onData: (d) => { c.text += dec.decode(d, { stream: true }) } })
  await t.type('echo after-connect\n')
  let connected = false
  for (const end = Date.now() + 10_000; Date.now() < end && !connected; await sleep(50)) {
    connected = /[\r\n]after-connect\r\n/.test(c.text)
  }
  const listed = (await sbx.commands.list()).some((p) => p.pid === t.handle.pid)
  const killed = await sbx.pty.kill(t.handle.pid)
  const w = await waited(handle)
  return {
    hi,
    samePid: handle.pid === t.handle.pid,
    connected,
    // the connection streams from its start on, not what came before
    sawBefore: /while-away\r\n[^]*while-away\r\n/.test(c.text) || c.text.includes('hi\r\n'),
    oldHandleSawAfter: t.text.includes('after-connect'),
    listed,
    killed,
    waited: w,
    tail: c.text.slice(-400),
  }
})

await throws('connectUnknown', () => sbx.pty.connect(999_999, { onData: () => {} }))
await throws('sendInputUnknown', () => sbx.pty.sendInput(999_999, enc.encode('x')))
await throws('resizeUnknown', () => sbx.pty.resize(999_999, { cols: 10, rows: 10 }))
await step('killUnknown', async () => ({ killed: await sbx.pty.kill(999_999) }))

for (const id of created) await Sandbox.kill(id).catch(() => {})
console.log(JSON.stringify(summary))
