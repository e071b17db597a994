// control.mjs - the E2B facade's control plane, driven by the official E2B
// SDK (npm e2b, pinned in package.json) exactly as a user's code would:
// pointed at nanobox by E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY=e2b_<key>
// alone. tests/integration/test_e2b.py runs it and asserts on the JSON
// summary it prints as its last line: one entry per step, {"thrown": ...}
// when the SDK threw where it should not have.
//
//   node control.mjs --tag <unique tag> [--code]
//
// Every sandbox it creates carries metadata {suite: tag}; it kills them all
// before it exits (the test's teardown deletes any it left).
import { Sandbox } from 'e2b'
import { suite } from './steps.mjs'

const args = process.argv.slice(2)
const tag = args[args.indexOf('--tag') + 1]
const withCode = args.includes('--code')
const { steps, created, summary, step, throws } = suite((e) => errInfo(e))

const errInfo = (e) => ({ name: e?.constructor?.name, message: String(e?.message ?? e) })
const secs = (d) => Math.round((d.getTime() - Date.now()) / 1000)
const info = (i) => ({
  sandboxId: i.sandboxId, templateId: i.templateId, metadata: i.metadata, state: i.state,
  cpuCount: i.cpuCount, memoryMB: i.memoryMB, envdVersion: i.envdVersion,
  startedAt: i.startedAt.toISOString(), endAt: i.endAt.toISOString(), endsIn: secs(i.endAt),
  lifecycle: i.lifecycle,
})

async function create (opts) {
  const s = await Sandbox.create({ ...opts, metadata: { suite: tag, ...(opts?.metadata ?? {}) } })
  created.push(s.sandboxId)
  return s
}

async function allPages (opts) {
  const p = Sandbox.list(opts)
  const pages = []
  while (p.hasNext) pages.push((await p.nextItems()).map((s) => s.sandboxId))
  return pages
}

let a, b, c
await step('create', async () => {
  a = await create({ metadata: { n: '0', 'we ird&k=y': 'a=b c&d' }, envs: { FOO: 'bar baz' }, timeoutMs: 120_000 })
  return { sandboxId: a.sandboxId }
})
// the envVars reached the sandbox: asked through nanobox's native API (E2B's
// commands are the data plane's, not served yet)
await step('envVisible', async () => {
  const r = await fetch(`${process.env.E2B_API_URL}/sandbox/${a.sandboxId}/exec`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${process.env.E2B_API_KEY.replace(/^e2b_/, '')}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ command: 'printf %s "$FOO"' }),
  })
  return { status: r.status, body: await r.json() }
})
await step('getInfo', async () => info(await a.getInfo()))
await step('isRunning', async () => ({ running: await a.isRunning() }))
await step('setTimeoutShorter', async () => {
  await a.setTimeout(30_000)
  return info(await a.getInfo())
})
await step('setTimeoutLonger', async () => {
  await a.setTimeout(600_000)
  return info(await a.getInfo())
})
await step('connectDoesNotShorten', async () => {
  const s = await Sandbox.connect(a.sandboxId, { timeoutMs: 60_000 })
  return { sandboxId: s.sandboxId, ...info(await s.getInfo()) }
})
await step('connectExtends', async () => {
  await a.connect({ timeoutMs: 900_000 })
  return info(await a.getInfo())
})

await step('createMore', async () => {
  b = await create({ metadata: { n: '1' } })
  c = await create({ metadata: { n: '2' }, timeoutMs: 60_000 })
  // b names no timeout: e2b before 2.50 sends its 300 s, 2.50 on sends none (the API's 300 s)
  return { ids: [b.sandboxId, c.sandboxId], defaultEndsIn: secs((await b.getInfo()).endAt) }
})
await step('listPaged', async () => ({ pages: await allPages({ query: { metadata: { suite: tag } }, limit: 2 }) }))
await step('listAsc', async () => ({ pages: await allPages({ query: { metadata: { suite: tag } }, order: 'asc' }) }))
await step('listDesc', async () => ({ pages: await allPages({ query: { metadata: { suite: tag } }, order: 'desc' }) }))
await step('listAscPaged', async () => ({ pages: await allPages({ query: { metadata: { suite: tag } }, order: 'asc', limit: 1 }) }))
await step('listMetadataPair', async () => ({ pages: await allPages({ query: { metadata: { suite: tag, n: '1' } } }) }))
await step('listMetadataOddChars', async () => ({ pages: await allPages({ query: { metadata: { 'we ird&k=y': 'a=b c&d' } } }) }))
await step('listTemplateBase', async () => ({ pages: await allPages({ query: { metadata: { suite: tag }, template: 'base' } }) }))
await step('listTemplateOther', async () => ({ pages: await allPages({ query: { metadata: { suite: tag }, template: 'code-interpreter-v1' } }) }))
await step('listStartedAfterFuture', async () => ({ pages: await allPages({ query: { metadata: { suite: tag }, startedAfter: new Date(Date.now() + 3600_000) } }) }))
await step('listStartedAfterPast', async () => ({ pages: await allPages({ query: { metadata: { suite: tag }, startedAfter: new Date(Date.now() - 3600_000) } }) }))
await step('listPausedBefore', async () => ({ pages: await allPages({ query: { metadata: { suite: tag }, state: ['paused'] } }) }))
await step('listFirstItem', async () => {
  const items = await Sandbox.list({ query: { metadata: { suite: tag, n: '0' } } }).nextItems()
  return { items: items.map((i) => ({ ...i, startedAt: i.startedAt.toISOString(), endAt: i.endAt.toISOString() })) }
})

await step('pause', async () => ({ paused: await b.betaPause() }))
await step('pauseAgain', async () => ({ paused: await b.pause() }))
await step('pausedInfo', async () => info(await b.getInfo()))
await step('pausedIsRunning', async () => ({ running: await b.isRunning() }))
await step('listPaused', async () => ({ pages: await allPages({ query: { metadata: { suite: tag }, state: ['paused'] } }) }))
await step('listRunning', async () => ({ pages: await allPages({ query: { metadata: { suite: tag }, state: ['running'] } }) }))
await step('connectResumes', async () => {
  const s = await Sandbox.connect(b.sandboxId, { timeoutMs: 300_000 })
  return { ...info(await s.getInfo()), running: await s.isRunning() }
})

await step('shortTimeoutEnds', async () => {
  await c.setTimeout(1_000)
  const deadline = Date.now() + 20_000
  let running = true
  while (running && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 500))
    running = await c.isRunning()
  }
  return { running }
})

// lifecycle {onTimeout: 'pause'}: paused at its timeout, not killed. getInfo
// (the control plane) watches it: the data plane would resume it (autoResume).
await step('onTimeoutPause', async () => {
  const d = await create({ timeoutMs: 2_000, lifecycle: { onTimeout: 'pause', autoResume: true } })
  const deadline = Date.now() + 20_000
  let i = await d.getInfo()
  while (i.state !== 'paused' && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 500))
    i = await d.getInfo()
  }
  const s = await Sandbox.connect(d.sandboxId, { timeoutMs: 60_000 })
  return { paused: info(i), resumed: info(await s.getInfo()) }
})

await step('kill', async () => ({ killed: await a.kill() }))
await step('killAgain', async () => ({ killed: await a.kill() }))
await step('staticKillGone', async () => ({ killed: await Sandbox.kill(a.sandboxId) }))
await step('killedIsRunning', async () => ({ running: await a.isRunning() }))
await throws('getInfoGone', () => a.getInfo())
await throws('connectGone', () => Sandbox.connect(a.sandboxId))
await throws('setTimeoutGone', () => a.setTimeout(10_000))
await throws('getInfoNotOurs', () => Sandbox.getInfo('i3b7ktq1xk1z0c4l9mr8s'))
await step('killNotOurs', async () => ({ killed: await Sandbox.kill('i3b7ktq1xk1z0c4l9mr8s') }))

await throws('wrongKeyCreate', () => Sandbox.create({ apiKey: 'e2b_' + '0123456789abcdef'.repeat(2) }))
await throws('wrongKeyList', () => Sandbox.list({ apiKey: 'e2b_' + 'fedcba9876543210'.repeat(2) }).nextItems())
await step('bareKeyList', async () => {
  const items = await Sandbox.list({
    apiKey: process.env.E2B_API_KEY.replace(/^e2b_/, ''), validateApiKey: false,
    query: { metadata: { suite: tag } },
  }).nextItems()
  return { count: items.length }
})
await throws('unknownTemplate', () => create({ template: 'no-such-template' }))
await throws('metricsUnknown', () => Sandbox.getMetrics('9d5ad481-3179-4bd9-9d2f-c00aae4a0279'))
await throws('timeoutTooLong', () => create({ timeoutMs: 365 * 24 * 3600_000 }))

if (withCode) {
  await step('codeTemplate', async () => {
    const s = await create({ template: 'code-interpreter-v1', timeoutMs: 60_000 })
    const i = info(await s.getInfo())
    await s.kill()
    return i
  })
}

for (const id of created) await Sandbox.kill(id).catch(() => {})
console.log(JSON.stringify(summary))
