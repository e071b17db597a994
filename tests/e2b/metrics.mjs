// metrics.mjs - getMetrics over a sandbox's usage history, driven by the
// official SDK (npm e2b) as a user's code would: the whole history, a
// {start, end} range of it (the instance method and the static one), a
// range with nothing in it, and a range that ends before it starts.
// tests/integration/test_metrics_history.py runs it against a stack that
// samples every second and asserts on the JSON summary its last line prints.
//
//   node metrics.mjs --tag <unique tag>
import { Sandbox } from 'e2b'
import { suite } from './steps.mjs'

const args = process.argv.slice(2)
const tag = args[args.indexOf('--tag') + 1]
const errInfo = (e) => ({ name: e?.constructor?.name, message: String(e?.message ?? e) })
const { created, summary, step, throws } = suite(errInfo)
// a metric as the summary shows it: its timestamp in unix milliseconds
const plain = (m) => m.map((x) => ({ ...x, timestamp: x.timestamp.getTime() }))

const s = await Sandbox.create({ metadata: { suite: tag }, timeoutMs: 300_000 })
created.push(s.sandboxId)
summary.sandbox = s.sandboxId

await step('all', async () => {
  await s.commands.run('head -c 8388608 /dev/zero > blob')
  let m = []
  for (let i = 0; i < 60 && m.length < 4; i++) {
    await new Promise((resolve) => setTimeout(resolve, 500))
    m = await s.getMetrics()
  }
  return plain(m)
})
const all = summary.steps.all
if (Array.isArray(all) && all.length >= 4) {
  const start = new Date(all[1].timestamp)
  const end = new Date(all[2].timestamp)
  await step('range', async () => plain(await s.getMetrics({ start, end })))
  await step('rangeStatic', async () => plain(await Sandbox.getMetrics(s.sandboxId, { start, end })))
}
await step('future', async () => {
  const start = new Date(Date.now() + 3600_000)
  return plain(await s.getMetrics({ start, end: new Date(start.getTime() + 60_000) }))
})
await throws('backwards', () => s.getMetrics({ start: new Date(), end: new Date(Date.now() - 60_000) }))

console.log(JSON.stringify(summary))
