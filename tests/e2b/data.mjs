// data.mjs - the E2B facade's data plane without Connect-RPC, driven by the
// official SDKs (npm e2b and @e2b/code-interpreter, pinned in package.json)
// exactly as a user's code would: envd's files (write, read, several files
// in one upload, a missing path) and the code interpreter (runCode's state,
// streaming callbacks, errors, rich results, javascript and bash, contexts,
// an aborted run). tests/integration/test_e2b.py runs it and asserts on the
// JSON summary it prints as its last line: one entry per step,
// {"thrown": ...} when the SDK threw where it should not have.
//
//   node data.mjs --tag <unique tag> [--code]
//
// Every sandbox it creates carries metadata {suite: tag} and is listed in
// the summary's "created": the test looks at them through nanobox's native
// API, then deletes them.
import { createHash, randomBytes } from 'node:crypto'
import { Sandbox } from 'e2b'
import { Sandbox as CodeSandbox } from '@e2b/code-interpreter'
import { suite } from './steps.mjs'

const args = process.argv.slice(2)
const tag = args[args.indexOf('--tag') + 1]
const withCode = args.includes('--code')
const { steps, created, summary, step, throws } = suite((e) => errInfo(e))

const errInfo = (e) => ({ name: e?.constructor?.name, message: String(e?.message ?? e) })
const sha = (b) => createHash('sha256').update(b).digest('hex')

// ------------------------------------------------------------------ files
const s = await Sandbox.create({ metadata: { suite: tag }, timeoutMs: 300_000 })
created.push(s.sandboxId)
summary.filesSandbox = s.sandboxId

// 1 MiB of every byte value, bytes exact both ways
const blob = randomBytes(1024 * 1024)
blob[0] = 0; blob[1] = 13; blob[2] = 10; blob[3] = 45; blob[4] = 45
summary.blobSha = sha(blob)
await step('writeBinary', async () => ({ entry: await s.files.write('bin/blob.bin', blob) }))
await step('readBinary', async () => {
  const back = await s.files.read('bin/blob.bin', { format: 'bytes' })
  return { size: back.length, sha: sha(Buffer.from(back)) }
})
await step('readBinaryAbsolute', async () => {
  const back = await s.files.read(steps.writeBinary.entry.path, { format: 'blob' })
  return { size: back.size, sha: sha(Buffer.from(await back.arrayBuffer())) }
})
await step('textRoundTrip', async () => {
  const entry = await s.files.write('/tmp/hello dir/h\u00e9llo.txt', 'h\u00e9llo\nw\u00f6rld\n')
  return { entry, text: await s.files.read('/tmp/hello dir/h\u00e9llo.txt') }
})
await step('emptyFile', async () => {
  const entry = await s.files.write('empty.txt', '')
  return { entry, text: await s.files.read('empty.txt'), bytes: (await s.files.read('empty.txt', { format: 'bytes' })).length }
})
await step('writeMany', async () => {
  const entries = await s.files.write([
    { path: 'many/a.txt', data: 'A' },
    { path: '/tmp/many/deep/b.txt', data: 'BB' },
    { path: 'many/c.bin', data: new Uint8Array([0, 255, 1, 254]).buffer },
  ])
  const back = await Promise.all(['many/a.txt', '/tmp/many/deep/b.txt'].map((p) => s.files.read(p)))
  const c = await s.files.read('many/c.bin', { format: 'bytes' })
  return { entries, back, c: Array.from(c) }
})
await step('overwrite', async () => {
  await s.files.write('many/a.txt', 'second')
  return { text: await s.files.read('many/a.txt') }
})
await throws('readMissing', () => s.files.read('nope/missing.txt'))
await throws('readDirectory', () => s.files.read('many'))
await throws('readBadPath', () => s.files.read('../etc/passwd'))

// ------------------------------------------------------ code interpreter
if (withCode) {
  const c = await CodeSandbox.create({ metadata: { suite: tag }, timeoutMs: 300_000 })
  created.push(c.sandboxId)
  summary.codeSandbox = c.sandboxId
  const ex = (e) => ({
    text: e.text,
    stdout: e.logs.stdout,
    stderr: e.logs.stderr,
    error: e.error ? { name: e.error.name, value: e.error.value, traceback: e.error.traceback } : null,
    executionCount: e.executionCount,
    results: e.results.map((r) => ({ ...r.toJSON(), isMainResult: r.isMainResult, formats: r.formats() })),
  })

  await step('state', async () => {
    await c.runCode('x = 1')
    return ex(await c.runCode('x += 1; x'))
  })
  await step('stringResult', async () => ex(await c.runCode("'abc'")))
  await step('streaming', async () => {
    const seen = []
    const t0 = Date.now()
    const e = await c.runCode(
      'import sys, time\nfor i in range(3):\n    print("out", i, flush=True)\n    time.sleep(0.4)\nprint("err", file=sys.stderr, flush=True)',
      {
        onStdout: (m) => seen.push({ kind: 'stdout', line: m.line, error: m.error, at: Date.now() - t0 }),
        onStderr: (m) => seen.push({ kind: 'stderr', line: m.line, error: m.error, at: Date.now() - t0 }),
      })
    return { seen, total: Date.now() - t0, stdout: e.logs.stdout, stderr: e.logs.stderr }
  })
  await step('error', async () => {
    let cb = null
    const e = await c.runCode('def f():\n    return 1 / 0\nf()', { onError: (err) => { cb = err.name } })
    return { ...ex(e), callback: cb }
  })
  await step('png', async () => {
    const results = []
    const e = await c.runCode(
      'import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()',
      { onResult: (r) => results.push(r.formats()) })
    const png = e.results.find((r) => r.png)?.png
    return { ...ex(e), callbackFormats: results, pngMagic: png ? Buffer.from(png, 'base64').subarray(0, 8).toString('hex') : null, results: undefined }
  })
  await step('pandasHtml', async () => {
    const e = await c.runCode('import pandas as pd\npd.DataFrame({"a": [1, 2], "b": ["x", "y"]})')
    const r = e.results[0]
    return { html: r?.html, text: r?.text, isMainResult: r?.isMainResult, formats: r?.formats() }
  })
  await step('envVars', async () => ex(await c.runCode('import os\nos.environ.get("E2B_T", "unset")', { envs: { E2B_T: 'v1' } })))
  await step('envVarsDoNotLeak', async () => ex(await c.runCode('import os\nos.environ.get("E2B_T", "unset")')))
  await step('javascript', async () => ex(await c.runCode('const y = 40\ny + 2', { language: 'javascript' })))
  await step('js', async () => ex(await c.runCode('console.log("from js")', { language: 'js' })))
  await step('bash', async () => ex(await c.runCode('echo "hi from $0-ish bash"; echo oops >&2', { language: 'bash' })))
  await throws('unknownLanguage', () => c.runCode('1', { language: 'cobol' }))

  // contexts
  let ctx
  await step('createContext', async () => {
    ctx = await c.createCodeContext({ language: 'python', cwd: '/tmp' })
    return ctx
  })
  await step('contextState', async () => {
    await c.runCode('z = 5', { context: ctx })
    return { inCtx: ex(await c.runCode('z', { context: ctx })), cwd: ex(await c.runCode('import os\nos.getcwd()', { context: ctx })), outside: ex(await c.runCode('z')) }
  })
  await step('listContexts', async () => (await c.listCodeContexts()))
  await step('restartContext', async () => {
    await c.restartCodeContext(ctx)
    return ex(await c.runCode('z', { context: ctx }))
  })
  await step('restartDefault', async () => {
    await c.restartCodeContext('python')
    return ex(await c.runCode('x'))
  })
  await step('jsContext', async () => {
    const j = await c.createCodeContext({ language: 'javascript' })
    await c.runCode('var k = 7', { context: j })
    const e = ex(await c.runCode('k * 6', { context: j }))
    await c.removeCodeContext(j.id)
    return { ctx: j, e }
  })
  await step('removeContext', async () => {
    await c.removeCodeContext(ctx.id)
    return { ids: (await c.listCodeContexts()).map((x) => x.id) }
  })
  await throws('runInRemovedContext', () => c.runCode('1', { context: ctx }))
  await throws('removeRemovedContext', () => c.removeCodeContext(ctx.id))

  // a client that gives up interrupts the kernel: the next run is not kept waiting
  await throws('abort', () => c.runCode('import time\ntime.sleep(60)', { timeoutMs: 1500 }))
  await step('afterAbort', async () => {
    const t0 = Date.now()
    const e = ex(await c.runCode('1 + 1', { timeoutMs: 20_000 }))
    return { ...e, ms: Date.now() - t0 }
  })

  // the sandbox killed under a running cell: the SDK's own "killed" error
  // (E2B's code-interpreter test sandboxKilledDuringRun), not a silent end
  const k = await CodeSandbox.create({ metadata: { suite: tag, n: 'killed' }, timeoutMs: 300_000 })
  created.push(k.sandboxId)
  await k.runCode('1')
  // killed once the cell has printed, so that the kill lands while it runs
  // (a timer could fire before the request reaches a loaded machine)
  await throws('killedDuringRun', async () => {
    let killed = false
    const onStdout = () => {
      if (!killed) { killed = true; CodeSandbox.kill(k.sandboxId).catch(() => {}) }
    }
    return ex(await k.runCode('import time\nprint("started", flush=True)\ntime.sleep(30)',
      { timeoutMs: 60_000, onStdout }))
  })
}

// the sandboxes stay for the test to look at through the native API; its
// teardown kills them. The script ends once its summary is out: an idle
// keep-alive connection the SDKs keep in their pool would otherwise hold
// node until nginx's keepalive_timeout (65 s) closed it.
process.stdout.write(JSON.stringify(summary) + '\n', () => process.exit(0))
