// signed.mjs - E2B's signed file URLs against nanobox: sbx.downloadUrl and
// sbx.uploadUrl of the official SDK, each URL then fetched with node's
// plain fetch, no SDK header (no E2b-Sandbox-Id, no X-Access-Token), as a
// browser or curl would. tests/integration/test_e2b_signed.py runs it and
// asserts on the JSON summary it prints as its last line.
//
//   node signed.mjs --tag <tag>                 E2B_SANDBOX_URL (one origin)
//   node signed.mjs --tag <tag> --port <port>   E2B_DOMAIN (hostroute.mjs)
//
// In the first mode the URL is <E2B_SANDBOX_URL>/files?path=…&signature=…:
// it names no sandbox, the signature does. In the second it is
// https://49983-<sandboxId>.<domain>/files?…
import { createHash, randomBytes } from 'node:crypto'
import { routeDomainTo } from './hostroute.mjs'
import { suite } from './steps.mjs'

const args = process.argv.slice(2)
const tag = args[args.indexOf('--tag') + 1]
const domainMode = args.includes('--port')
if (domainMode) routeDomainTo(process.env.E2B_DOMAIN, Number(args[args.indexOf('--port') + 1]))
const { Sandbox } = await import('e2b')

const { steps, created, summary, step } = suite((e) => errInfo(e))
const errInfo = (e) => ({ name: e?.constructor?.name, message: String(e?.message ?? e) })
const sha = (b) => createHash('sha256').update(b).digest('hex')

// a URL as a client without the SDK sees it: its host and query keys
const shape = (url) => {
  const u = new URL(url)
  return { origin: u.origin, keys: [...u.searchParams.keys()].sort() }
}
// GET with nothing but the URL
const get = async (url) => {
  const r = await fetch(url)
  const body = Buffer.from(await r.arrayBuffer())
  return { status: r.status, body }
}
const errorOf = async (r) => {
  const text = await r.text()
  try { return { status: r.status, json: JSON.parse(text) } } catch { return { status: r.status, text } }
}
// POST one multipart part named "file" (its filename need not be the path)
const post = async (url, data, filename = 'picked-by-the-browser.txt') => {
  const fd = new FormData()
  fd.append('file', new Blob([data]), filename)
  return fetch(url, { method: 'POST', body: fd })
}

const sbx = await Sandbox.create({ metadata: { suite: tag }, timeoutMs: 300_000, secure: true })
created.push(sbx.sandboxId)
summary.id = sbx.sandboxId
const blob = randomBytes(200_000)
summary.blobSha = sha(blob)

await step('token', async () => ({ hex64: /^[0-9a-f]{64}$/.test(sbx.envdAccessToken ?? '') }))
await step('setup', async () => {
  await sbx.files.write('signed/a.txt', 'signed hello')
  await sbx.files.write('signed/blob.bin', blob)
})
await step('download', async () => {
  const url = await sbx.downloadUrl('signed/a.txt')
  const r = await get(url)
  return { ...shape(url), status: r.status, text: r.body.toString() }
})
await step('downloadBinary', async () => {
  const r = await get(await sbx.downloadUrl('/home/user/signed/blob.bin'))
  return { status: r.status, size: r.body.length, sha: sha(r.body) }
})
await step('downloadExpiring', async () => {
  const url = await sbx.downloadUrl('signed/a.txt', { useSignatureExpiration: 120, user: 'user' })
  const r = await get(url)
  return { ...shape(url), status: r.status, text: r.body.toString() }
})
await step('upload', async () => {
  const url = await sbx.uploadUrl('signed/up.txt')
  const r = await post(url, 'uploaded by url')
  return {
    ...shape(url),
    status: r.status,
    answer: await r.json(),
    read: await sbx.files.read('signed/up.txt'),
    filenameWritten: await sbx.files.exists('picked-by-the-browser.txt'),
  }
})
await step('uploadExpiring', async () => {
  const url = await sbx.uploadUrl('/home/user/signed/up2.txt', { useSignatureExpiration: 60, user: 'user' })
  const r = await post(url, 'second')
  return { ...shape(url), status: r.status, read: await sbx.files.read('signed/up2.txt') }
})
await step('expired', async () => {
  const url = await sbx.downloadUrl('signed/a.txt', { useSignatureExpiration: -60 })
  return errorOf(await fetch(url))
})
await step('expiredUpload', async () => {
  const url = await sbx.uploadUrl('signed/never.txt', { useSignatureExpiration: -60 })
  const r = await errorOf(await post(url, 'never'))
  return { ...r, written: await sbx.files.exists('signed/never.txt') }
})
await step('readUrlUsedToWrite', async () => {
  const r = await errorOf(await post(await sbx.downloadUrl('signed/a.txt'), 'overwritten'))
  return { ...r, read: await sbx.files.read('signed/a.txt') }
})
await step('otherPath', async () => {
  const u = new URL(await sbx.downloadUrl('signed/a.txt'))
  u.searchParams.set('path', 'signed/up.txt')
  return errorOf(await fetch(u))
})
await step('connectedObject', async () => {
  const again = await Sandbox.connect(sbx.sandboxId)
  const r = await get(await again.downloadUrl('signed/a.txt'))
  return { status: r.status, text: r.body.toString() }
})

// another sandbox, created with secure: false: it gets a token all the same
const other = await Sandbox.create({ metadata: { suite: tag }, timeoutMs: 300_000, secure: false })
created.push(other.sandboxId)
await step('insecureGetsAToken', async () => ({ hex64: /^[0-9a-f]{64}$/.test(other.envdAccessToken ?? '') }))
await step('eachSandboxItsOwn', async () => {
  await other.files.write('signed/a.txt', 'the other one')
  const mine = await get(await sbx.downloadUrl('signed/a.txt'))
  const its = await get(await other.downloadUrl('signed/a.txt'))
  return { mine: mine.body.toString(), its: its.body.toString() }
})
if (domainMode) {
  // the first sandbox's URL on the other's host: the signature is not its
  await step('otherHost', async () => {
    const url = await sbx.downloadUrl('signed/a.txt')
    return errorOf(await fetch(url.replace(sbx.sandboxId, other.sandboxId)))
  })
}
await step('killed', async () => {
  const url = await sbx.downloadUrl('signed/a.txt')
  await sbx.kill()
  return { status: (await fetch(url)).status }
})

console.log(JSON.stringify(summary))
