// pausecold.mjs - a pause that releases the memory, driven by the official
// E2B SDK as a user's code would: sbx.pause({ keepMemory: false }) (the
// SDK sends {"memory": false}) and lifecycle.onTimeout {action: 'pause',
// keepMemory: false} at create (autoPause, autoPauseMemory: false). The
// files come back on connect; processes do not (no CRIU): a resume boots
// a new container from the saved files. tests/integration/test_e2b_pause.py
// runs it and asserts on the JSON summary its last line prints.
//
//   node pausecold.mjs --tag <unique tag>
import { Sandbox } from 'e2b'
import { suite } from './steps.mjs'

const args = process.argv.slice(2)
const tag = args[args.indexOf('--tag') + 1]
const { steps, created, summary, step, throws } = suite((e) => errInfo(e))
const errInfo = (e) => ({ name: e?.constructor?.name, message: String(e?.message ?? e) })
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

async function create (opts) {
  const s = await Sandbox.create({ ...opts, metadata: { suite: tag } })
  created.push(s.sandboxId)
  return s
}

// nanobox's own view of it: whether its memory was released
async function native (id) {
  const r = await fetch(`${process.env.E2B_API_URL}/sandbox/${id}`, {
    headers: { Authorization: `Bearer ${process.env.E2B_API_KEY.replace(/^e2b_/, '')}` },
  })
  const j = await r.json()
  return { state: j.state, memory_released: j.memory_released ?? null }
}

async function waitPaused (s) {
  const deadline = Date.now() + 30_000
  let i = await s.getInfo()
  while (i.state !== 'paused' && Date.now() < deadline) {
    await sleep(500)
    i = await s.getInfo()
  }
  return i.state
}

let a, b
await step('create', async () => {
  a = await create({ timeoutMs: 300_000, envs: { KEPT_ENV: 'yes' } })
  await a.files.write('kept.txt', 'kept in the workspace')
  await a.commands.run('echo kept in tmp > /tmp/t')
  return { sandboxId: a.sandboxId }
})
await step('pauseWithoutMemory', async () => {
  const paused = await a.pause({ keepMemory: false })
  return { paused, state: (await a.getInfo()).state, native: await native(a.sandboxId) }
})
await step('isRunningWhilePaused', async () => ({ running: await a.isRunning() }))
await step('connectBootsFromFiles', async () => {
  const s = await Sandbox.connect(a.sandboxId, { timeoutMs: 300_000 })
  const r = await s.commands.run('cat ~/kept.txt; echo; cat /tmp/t; printf %s "$KEPT_ENV"')
  return { state: (await s.getInfo()).state, native: await native(a.sandboxId), stdout: r.stdout }
})
await step('autoPauseWithoutMemory', async () => {
  b = await create({ timeoutMs: 3_000, lifecycle: { onTimeout: { action: 'pause', keepMemory: false } } })
  await b.files.write('/tmp/b.txt', 'b kept')
  const state = await waitPaused(b)
  // paused at once, its files saved a moment later
  let nat = await native(b.sandboxId)
  for (const deadline = Date.now() + 20_000; !nat.memory_released && Date.now() < deadline;) {
    await sleep(200)
    nat = await native(b.sandboxId)
  }
  const s = await Sandbox.connect(b.sandboxId, { timeoutMs: 60_000 })
  return { state, native: nat, text: await s.files.read('/tmp/b.txt'), after: (await s.getInfo()).state }
})
// E2B's own rule, in the SDK: traffic cannot resume a filesystem-only pause
await throws('autoResumeWithoutMemory', () => Sandbox.create({
  timeoutMs: 60_000, metadata: { suite: tag },
  lifecycle: { onTimeout: { action: 'pause', keepMemory: false }, autoResume: true },
}))
await step('kill', async () => ({ a: await a.kill(), b: await b.kill() }))
await step('killedNative', async () => ({ status: (await fetch(`${process.env.E2B_API_URL}/sandbox/${a.sandboxId}`, {
  headers: { Authorization: `Bearer ${process.env.E2B_API_KEY.replace(/^e2b_/, '')}` },
})).status }))
console.log(JSON.stringify(summary))
