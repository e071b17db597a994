// snapshots.mjs - E2B's snapshots and fork, driven by the official SDK
// (npm e2b) as a user's code would: sbx.createSnapshot() named and not,
// Sandbox.listSnapshots() and sbx.listSnapshots(), Sandbox.create() from a
// snapshot, sbx.fork({count: 2}) (files, env and metadata copied; the
// processes restart), Sandbox.deleteSnapshot(), and the errors the SDK
// maps: a fork or snapshot of a killed sandbox is SandboxNotFoundError.
// tests/integration/test_e2b_snapshots.py runs it and asserts on the JSON
// summary its last line prints.
//
//   node snapshots.mjs --tag <unique tag>
import { Sandbox } from 'e2b'
import { suite } from './steps.mjs'

const args = process.argv.slice(2)
const tag = args[args.indexOf('--tag') + 1]
const errInfo = (e) => ({ name: e?.constructor?.name, message: String(e?.message ?? e) })
const { created, summary, step, throws } = suite(errInfo)
const opts = { metadata: { suite: tag }, envs: { FOO: 'from parent' }, timeoutMs: 300_000 }
const READ = 'cat state.json; echo; echo "$FOO"; pgrep -x sleep || echo no-procs'

const s = await Sandbox.create(opts)
created.push(s.sandboxId)
summary.sandbox = s.sandboxId
await s.files.write('state.json', '{"step": 1}')
await s.commands.run('sleep 1000', { background: true })

const name = `snap-${tag}`
await step('createNamed', () => s.createSnapshot({ name }))
await step('createUnnamed', () => s.createSnapshot())
await step('listAll', () => Sandbox.listSnapshots().nextItems())
await step('listOfSandbox', () => s.listSnapshots().nextItems())
await step('listPaged', async () => {
  const p = Sandbox.listSnapshots({ limit: 1 })
  const pages = []
  while (p.hasNext) pages.push(await p.nextItems())
  return { pages }
})
await step('fromSnapshot', async () => {
  const k = await Sandbox.create(summary.steps.createNamed.snapshotId, { metadata: { suite: tag } })
  created.push(k.sandboxId)
  const r = await k.commands.run(READ)
  return { sandboxId: k.sandboxId, stdout: r.stdout }
})
await step('fork', async () => {
  const forks = await s.fork({ count: 2 })
  const out = []
  for (const f of forks) {
    if (f instanceof Error) {
      out.push({ error: errInfo(f) })
      continue
    }
    created.push(f.sandboxId)
    const r = await f.commands.run(READ)
    const info = await f.getInfo()
    out.push({ sandboxId: f.sandboxId, stdout: r.stdout, metadata: info.metadata })
  }
  return { forks: out }
})
await step('parentRunsOn', async () => ({ stdout: (await s.commands.run(READ)).stdout }))
await step('deleteUnnamed', () => Sandbox.deleteSnapshot(summary.steps.createUnnamed.snapshotId))
await step('deleteAgain', () => Sandbox.deleteSnapshot(summary.steps.createUnnamed.snapshotId))
await step('listAfterDelete', () => Sandbox.listSnapshots().nextItems())
const gone = await Sandbox.create(opts)
await gone.kill()
await throws('forkKilled', () => Sandbox.fork(gone.sandboxId))
await throws('snapshotKilled', () => Sandbox.createSnapshot(gone.sandboxId))
await throws('forkTooMany', () => s.fork({ count: 1000 }))

console.log(JSON.stringify(summary))
