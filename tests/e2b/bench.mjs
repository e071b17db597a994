// bench.mjs - the E2B facade against nanobox's native API, same run, same
// client (node; the native side with fetch, keep-alive as the SDK's undici
// is). tests/bench/bench_e2b.py runs it and prints the table; this prints
// one JSON line: {op: {e2b: [ms...], native: [ms...]}}.
//
//   node bench.mjs --url URL --key KEY -n 30 [--warm N] [--code]
//
// - create: Sandbox.create() (and its request sent with fetch: e2b_fetch,
//   the facade without the SDK's own work) against POST /sandbox {}, each from a full
//   warm pool (GET /healthz "warm" == N before each, not timed), the
//   sandbox killed after (not timed).
// - run: commands.run('true') against POST /sandbox/{id}/exec {"command":"true"}
//   and against the argv the SDK sends, /bin/bash -l -c true (native_bash);
//   also the SDK's Start request sent with fetch (e2b_fetch: the facade
//   without the SDK's own work, the same argv as native_bash).
// - code: runCode('1+1') against POST /sandbox/{id}/code {"code":"1+1"} (--code).
// - files: files.write + files.read of 1 MiB against PUT + GET /sandbox/{id}/files.
// Within each op the two sides alternate, in a random order each round.
import { randomBytes } from 'node:crypto'
import { Sandbox } from 'e2b'
import { Sandbox as CodeSandbox } from '@e2b/code-interpreter'

const args = process.argv.slice(2)
const arg = (k, d) => (args.includes(k) ? args[args.indexOf(k) + 1] : d)
const url = arg('--url')
const key = arg('--key')
const n = Number(arg('-n', '30'))
const warm = Number(arg('--warm', '1'))
const withCode = args.includes('--code')
process.env.E2B_API_URL = url
process.env.E2B_SANDBOX_URL = url
process.env.E2B_API_KEY = `e2b_${key}`

const auth = { Authorization: `Bearer ${key}` }
const native = async (method, path, body, headers = {}) => {
  const r = await fetch(url + path, { method, headers: { ...auth, ...headers }, body })
  const buf = Buffer.from(await r.arrayBuffer())
  if (!r.ok) throw new Error(`${method} ${path} -> ${r.status} ${buf.toString().slice(0, 200)}`)
  return buf
}
const postJson = (path, o) => native('POST', path, JSON.stringify(o), { 'Content-Type': 'application/json' })
const now = () => performance.now()
const out = {}
const record = (op, side, ms) => { ((out[op] ??= {})[side] ??= []).push(ms) }

// one round: every side once, in a random order
async function round (op, sides) {
  const order = Object.keys(sides).sort(() => Math.random() - 0.5)
  for (const side of order) {
    await sides[side].before?.()
    const t0 = now()
    const v = await sides[side].run()
    record(op, side, now() - t0)
    await sides[side].after?.(v)
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
async function poolFull () {
  for (let i = 0; i < 600; i++) {
    const h = JSON.parse(await native('GET', '/healthz'))
    if (h.warm >= warm) return
    await sleep(25)
  }
  throw new Error('the warm pool did not refill')
}

// ---- create
for (let i = 0; i < n; i++) {
  await round('create', {
    e2b: { before: poolFull, run: () => Sandbox.create(), after: (s) => s.kill() },
    // the facade without the SDK: the body Sandbox.create() sends, with fetch
    e2b_fetch: {
      before: poolFull,
      run: async () => JSON.parse(await native('POST', '/sandboxes', JSON.stringify({
        templateID: 'base', timeout: 300, secure: true, allow_internet_access: true,
      }), { 'Content-Type': 'application/json', 'X-API-KEY': `e2b_${key}` })),
      after: (s) => native('DELETE', `/sandbox/${s.sandboxID}`),
    },
    native: {
      before: poolFull,
      run: async () => JSON.parse(await postJson('/sandbox', {})),
      after: (s) => native('DELETE', `/sandbox/${s.sandboxId}`),
    },
  })
}

// ---- commands.run('true') and files on one sandbox (warm-up calls first, not timed)
const sbx = await Sandbox.create({ timeoutMs: 600_000 })
const id = sbx.sandboxId
const exec = () => postJson(`/sandbox/${id}/exec`, { command: 'true' })
// what the SDK runs: a login bash (its profile is read), not sh
const execBash = () => postJson(`/sandbox/${id}/exec`, { argv: ['/bin/bash', '-l', '-c', 'true'] })
// the request commands.run('true') sends: one Connect envelope, read to the end of the stream
const envelope = (o) => {
  const b = Buffer.from(JSON.stringify(o))
  const h = Buffer.alloc(5)
  h.writeUInt32BE(b.length, 1)
  return Buffer.concat([h, b])
}
const startFetch = () => native('POST', '/process.Process/Start',
  envelope({ process: { cmd: '/bin/bash', args: ['-l', '-c', 'true'], envs: {} }, stdin: false }), {
    'Content-Type': 'application/connect+json', 'Connect-Protocol-Version': '1',
    'Keepalive-Ping-Interval': '50', 'E2b-Sandbox-Id': id, 'E2b-Sandbox-Port': '49983',
    'X-Access-Token': sbx.envdAccessToken,
  })
await sbx.commands.run('true')
await exec()
await execBash()
await startFetch()
for (let i = 0; i < n; i++) {
  await round('run', {
    e2b: { run: () => sbx.commands.run('true') },
    e2b_fetch: { run: startFetch },
    native: { run: exec },
    native_bash: { run: execBash },
  })
}

const blob = randomBytes(1 << 20)
const fpath = '/tmp/bench.bin' // a path of both layouts (E2B's has no /workspace tmpfs)
for (let i = 0; i < n; i++) {
  await round('files', {
    e2b: {
      run: async () => {
        await sbx.files.write(fpath, blob)
        const back = await sbx.files.read(fpath, { format: 'bytes' })
        if (back.length !== blob.length) throw new Error('short read')
      },
    },
    native: {
      run: async () => {
        await native('PUT', `/sandbox/${id}/files?path=${fpath}`, blob)
        const back = await native('GET', `/sandbox/${id}/files?path=${fpath}`)
        if (back.length !== blob.length) throw new Error('short read')
      },
    },
  })
}
await sbx.kill()

// ---- runCode('1+1') on one code-interpreter sandbox
if (withCode) {
  const c = await CodeSandbox.create({ timeoutMs: 600_000 })
  const cid = c.sandboxId
  const code = () => postJson(`/sandbox/${cid}/code`, { code: '1+1' })
  await c.runCode('1+1')
  await code()
  for (let i = 0; i < n; i++) {
    await round('code', {
      e2b: {
        run: async () => {
          const x = await c.runCode('1+1')
          if (x.text !== '2') throw new Error(`runCode said ${x.text}`)
        },
      },
      native: { run: code },
    })
  }
  await c.kill()
}

console.log(JSON.stringify(out))
