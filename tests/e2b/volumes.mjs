// volumes.mjs - E2B's volume API on nanobox, driven by the official E2B SDK
// (npm e2b) as a user's code would: Volume.create, list, getInfo, connect,
// destroy, and Sandbox.create's volumeMounts (by Volume and by name): the
// files a sandbox writes there outlive it and another sandbox of the key
// sees them; a mounted volume cannot be destroyed; an unknown id is
// VolumeNotFoundError (getInfo) and false (destroy). The volume content API
// (vol.list/readFile/writeFile: E2B's separate domain and per-volume
// token) is not offered: one step records what the SDK says there.
// tests/integration/test_volumes.py runs it and asserts on the JSON
// summary of its last line (steps.mjs).
//
//   node volumes.mjs --tag <unique tag>
import { Sandbox, Volume } from 'e2b'
import { suite } from './steps.mjs'

const args = process.argv.slice(2)
const tag = args[args.indexOf('--tag') + 1]
const errInfo = (e) => ({ name: e?.constructor?.name, message: String(e?.message ?? e) })
const { created, summary, step, throws } = suite(errInfo)
const name = `v-${tag}`
const out = async (p) => (await p).stdout

let vol
await step('create', async () => {
  vol = await Volume.create(name)
  return { name: vol.name, idLength: vol.volumeId.length }
})
await step('list', async () => (await Volume.list()).filter((v) => v.name === name).map((v) => v.volumeId === vol.volumeId))
await step('getInfo', async () => {
  const i = await Volume.getInfo(vol.volumeId)
  return { name: i.name, same: i.volumeId === vol.volumeId }
})
await step('connect', async () => ({ name: (await Volume.connect(vol.volumeId)).name }))
await throws('getInfoUnknown', () => Volume.getInfo('0000000000000000'))
await step('destroyUnknown', async () => ({ destroyed: await Volume.destroy('0000000000000000') }))
await throws('createTwice', () => Volume.create(name))

await step('writeThrough', async () => {
  const sbx = await Sandbox.create({ metadata: { suite: tag }, timeoutMs: 120_000, volumeMounts: { '/mnt/data': vol } })
  created.push(sbx.sandboxId)
  const w = await out(sbx.commands.run('echo kept > /mnt/data/f && cat /mnt/data/f'))
  const busy = await Volume.destroy(vol.volumeId).then((r) => ({ returned: r }), (e) => errInfo(e))
  await sbx.kill()
  return { w, busy }
})
await step('readBack', async () => {
  const sbx = await Sandbox.create({ metadata: { suite: tag }, timeoutMs: 120_000, volumeMounts: { '/home/user/vol': name } })
  created.push(sbx.sandboxId)
  const r = await out(sbx.commands.run('cat /home/user/vol/f'))
  await sbx.kill()
  return { r }
})
await throws('badPath', () => Sandbox.create({ metadata: { suite: tag }, volumeMounts: { '/proc/x': vol } }))
await throws('unknownVolume', () => Sandbox.create({ metadata: { suite: tag }, volumeMounts: { '/mnt/x': 'no-such-volume' } }))
await throws('contentApi', () => vol.list('/', { requestTimeoutMs: 5000 }))
await step('destroy', async () => ({ destroyed: await Volume.destroy(vol.volumeId) }))
await step('gone', async () => (await Volume.list()).filter((v) => v.name === name).length)
console.log(JSON.stringify(summary))
