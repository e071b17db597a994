// watch.mjs - sbx.files.watchDir (envd's filesystem.Filesystem/WatchDir
// stream) and files.rename across mounts, driven by the official SDK (npm
// e2b, pinned in package.json) as a user's code would.
// tests/integration/test_e2b.py runs it and asserts on the JSON summary it
// prints as its last line: one entry per step, {"thrown": ...} when the
// SDK threw where it should not have.
//
//   node watch.mjs --tag <unique tag>
//
// The sandbox it creates carries metadata {suite: tag} and is listed in the
// summary's "created".
import { Sandbox } from 'e2b'
import { suite } from './steps.mjs'

const args = process.argv.slice(2)
const tag = args[args.indexOf('--tag') + 1]
const { steps, created, summary, step, throws } = suite((e) => errInfo(e))

const errInfo = (e) => ({ name: e?.constructor?.name, message: String(e?.message ?? e) })
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

// Wait until pred holds for the events seen so far (at most ms).
async function until (events, pred, ms = 5000) {
  for (const end = Date.now() + ms; Date.now() < end; await sleep(20)) {
    if (pred(events)) return true
  }
  return false
}
const has = (events, type, name) => events.some((e) => e.type === type && e.name === name)

const s = await Sandbox.create({ metadata: { suite: tag }, timeoutMs: 300_000 })
created.push(s.sandboxId)
summary.sandbox = s.sandboxId

await s.files.makeDir('watched/sub')

await step('watch', async () => {
  const events = []
  let exited = null
  const h = await s.files.watchDir('watched', (e) => events.push({ name: e.name, type: e.type }), {
    onExit: (err) => { exited = err ? errInfo(err) : 'ok' },
  })
  await s.commands.run('echo one > watched/by-command.txt')
  await s.files.write('watched/by-sdk.txt', 'two')
  await s.commands.run('chmod 600 watched/by-sdk.txt && mv watched/by-command.txt watched/renamed.txt && rm watched/renamed.txt')
  await s.commands.run('echo deep > watched/sub/deep.txt')
  const all = await until(events, (ev) => has(ev, 'remove', 'renamed.txt'))
  await h.stop()
  const countAtStop = events.length
  await s.commands.run('echo late > watched/late.txt')
  await sleep(300)
  return { all, events, afterStop: events.length - countAtStop, exited }
})

await step('watchRecursive', async () => {
  const events = []
  const h = await s.files.watchDir('watched', (e) => events.push({ name: e.name, type: e.type }), { recursive: true })
  await s.commands.run('mkdir -p watched/sub/new && echo x > watched/sub/new/f.txt')
  await s.files.write('watched/sub/up.txt', 'up')
  const all = await until(events, (ev) => has(ev, 'write', 'sub/up.txt') && has(ev, 'create', 'sub/new/f.txt'))
  await h.stop()
  return { all, events }
})

await throws('watchMissing', () => s.files.watchDir('no-such-dir', () => {}))
await throws('watchFile', async () => {
  await s.files.write('plain.txt', 'x')
  return s.files.watchDir('plain.txt', () => {})
})

await step('renameAcrossMounts', async () => {
  await s.commands.run('mkdir -p mv/d && printf abc > mv/d/f && chmod 750 mv/d && ln -s d/f mv/link')
  const moved = await s.files.rename('mv', '/tmp/mv')
  const r = await s.commands.run('cat /tmp/mv/d/f; echo; stat -c %a /tmp/mv/d; readlink /tmp/mv/link; test -e mv; echo $?')
  return { path: moved.path, type: moved.type, out: r.stdout.split('\n').slice(0, 4) }
})

// entry info in watch events (envd >= 0.6.3) and watches on any mount
// (envd >= 0.6.4's allowNetworkMounts): /proc and /sys are watched
// harmlessly, as any directory the user may read
await step('watchIncludeEntry', async () => {
  const events = []
  const h = await s.files.watchDir('watched', (e) => events.push({ name: e.name, type: e.type, entry: e.entry ? { type: e.entry.type, path: e.entry.path, size: e.entry.size, metadata: e.entry.metadata ?? null } : null }), { includeEntry: true, allowNetworkMounts: true })
  await s.files.write('watched/entry.txt', 'five!', { metadata: { k: 'v' } })
  await s.commands.run('rm watched/entry.txt')
  const all = await until(events, (ev) => has(ev, 'remove', 'entry.txt'))
  await h.stop()
  return { all, events }
})
await step('watchProcAndSys', async () => {
  const out = {}
  for (const p of ['/proc', '/proc/1', '/sys/fs/cgroup']) {
    try {
      const events = []
      const h = await s.files.watchDir(p, (e) => events.push(e.name), { allowNetworkMounts: true })
      await s.commands.run('true')
      await sleep(200)
      await h.stop()
      out[p] = { started: true, events: events.length }
    } catch (e) {
      out[p] = errInfo(e)
    }
  }
  out.alive = (await s.commands.run('echo ok')).stdout.trim()
  return out
})

console.log(JSON.stringify(summary))
