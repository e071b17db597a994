// bench_desktop.mjs - computer-use desktops through E2B's desktop SDK
// (npm @e2b/desktop, pinned in package.json), for tests/bench/bench_desktop.py:
//
//   first    Sandbox.create() + the first screenshot(), each round a new
//            desktop (the SDK starts Xvfb and xfce4 and waits for them);
//            also create alone and the base SDK's create of the same
//            template (the container, without the SDK's X start)
//   shot     screenshot() on one desktop vs the same `scrot --pointer` run
//            by nanobox's POST /sandbox/{id}/exec, alone and followed by
//            GET /sandbox/{id}/files of the PNG (what screenshot() does)
//   memory   memory.current of GET /sandbox/{id}/metrics for each desktop
//            of `first`, idle (10 s after its first screenshot)
//
//   node bench_desktop.mjs --url URL --key KEY [-n 5] [--shots 30]
//
// Prints one JSON line: {first: [...ms], create: [...], container: [...],
// e2b_shot: [...], exec_scrot: [...], exec_scrot_get: [...], memory: [...bytes]}.
import { Sandbox } from '@e2b/desktop'
import { Sandbox as BaseSandbox } from 'e2b'

const argv = process.argv.slice(2)
const arg = (name, dflt) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : dflt)
const URL_ = arg('--url')
const KEY = arg('--key')
const N = Number(arg('-n', '5'))
const SHOTS = Number(arg('--shots', '30'))
process.env.E2B_API_URL = URL_
process.env.E2B_SANDBOX_URL = URL_
process.env.E2B_API_KEY = `e2b_${KEY}`
const H = { Authorization: `Bearer ${KEY}`, 'Content-Type': 'application/json' }
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const now = () => performance.now()

const res = { first: [], create: [], container: [], e2b_shot: [], exec_scrot: [], exec_scrot_get: [], memory: [] }

async function native (method, path, body) {
  const r = await fetch(URL_ + path, { method, headers: H, body: body && JSON.stringify(body) })
  if (!r.ok) throw new Error(`${method} ${path} -> ${r.status} ${await r.text()}`)
  return r
}

let keep = null
for (let i = 0; i < N; i++) {
  // the container alone: the base SDK, the same template
  let t = now()
  const bare = await BaseSandbox.create('desktop', { timeoutMs: 120_000 })
  res.container.push(now() - t)
  await bare.kill()

  t = now()
  const sbx = await Sandbox.create({ timeoutMs: 600_000 })
  res.create.push(now() - t)
  await sbx.screenshot()
  res.first.push(now() - t)
  await sleep(10_000)
  const m = await (await native('GET', `/sandbox/${sbx.sandboxId}/metrics`)).json()
  res.memory.push(m.memory.current)
  if (keep === null) keep = sbx
  else await sbx.kill()
}

// screenshots on one desktop, the three ways interleaved
const id = keep.sandboxId
for (let i = 0; i < SHOTS; i++) {
  let t = now()
  await keep.screenshot()
  res.e2b_shot.push(now() - t)
  t = now()
  await native('POST', `/sandbox/${id}/exec`, { command: 'scrot --pointer /tmp/bench.png' })
  res.exec_scrot.push(now() - t)
  t = now()
  await native('POST', `/sandbox/${id}/exec`, { command: 'scrot --pointer -o /tmp/bench2.png' })
  await (await native('GET', `/sandbox/${id}/files?path=/tmp/bench2.png`)).arrayBuffer()
  res.exec_scrot_get.push(now() - t)
  await native('POST', `/sandbox/${id}/exec`, { command: 'rm -f /tmp/bench.png /tmp/bench2.png' })
}
await keep.kill()
console.log(JSON.stringify(res))
process.exit(0)
