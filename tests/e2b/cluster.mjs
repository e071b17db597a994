// cluster.mjs - the official E2B SDK against a cluster's front nginx
// (docs/CLUSTER.md): E2B_API_URL and E2B_SANDBOX_URL both name the front,
// which sends a create to any node (placed there), a control call by the
// id in its path and a data-plane call (envd's Connect-RPC, /files) by
// the E2b-Sandbox-Id header, each to the node the id names.
// tests/integration/test_cluster.py runs it and asserts on the JSON summary
// it prints as its last line.
//
//   node cluster.mjs --tag <unique tag> [--count N]
//
// Its sandboxes carry metadata {suite: tag}; it kills them before it exits.
import { Sandbox } from 'e2b'
import { suite } from './steps.mjs'

const args = process.argv.slice(2)
const tag = args[args.indexOf('--tag') + 1]
const count = args.includes('--count') ? Number(args[args.indexOf('--count') + 1]) : 4
const { steps, created, summary, step } = suite((e) => ({
  name: e?.constructor?.name, message: String(e?.message ?? e),
}))

const boxes = []
await step('create', async () => {
  for (let i = 0; i < count; i++) {
    const sbx = await Sandbox.create({ metadata: { suite: tag, n: String(i) }, timeoutMs: 300_000 })
    created.push(sbx.sandboxId)
    boxes.push(sbx)
  }
  return { ids: boxes.map((s) => s.sandboxId) }
})
// each sandbox's data plane reaches its own node: a command and a file
await step('commands', async () => {
  const out = []
  for (const sbx of boxes) {
    const r = await sbx.commands.run(`echo ${sbx.sandboxId}`)
    out.push(r.stdout === `${sbx.sandboxId}\n` && r.exitCode === 0)
  }
  return { ok: out }
})
await step('files', async () => {
  const out = []
  for (const sbx of boxes) {
    await sbx.files.write('/home/user/who.txt', sbx.sandboxId)
    out.push((await sbx.files.read('/home/user/who.txt')) === sbx.sandboxId)
  }
  return { ok: out }
})
// the control plane by id: getInfo, and one list of the whole cluster, paged
await step('getInfo', async () => {
  const out = []
  for (const sbx of boxes) out.push((await sbx.getInfo()).sandboxId === sbx.sandboxId)
  return { ok: out }
})
await step('list', async () => {
  const p = Sandbox.list({ query: { metadata: { suite: tag } }, limit: 2 })
  const ids = []
  let pages = 0
  while (p.hasNext && pages < 10) {
    for (const s of await p.nextItems()) ids.push(s.sandboxId)
    pages++
  }
  return { ids: ids.sort(), pages }
})
await step('kill', async () => {
  const out = []
  for (const sbx of boxes) out.push(await sbx.kill())
  return { killed: out }
})
await step('listAfterKill', async () => {
  const items = await Sandbox.list({ query: { metadata: { suite: tag } } }).nextItems()
  return { ids: items.map((s) => s.sandboxId) }
})

console.log(JSON.stringify(summary))
