// fs.mjs - sbx.files over envd's filesystem.Filesystem (Connect-RPC), driven
// by the official SDK (npm e2b, pinned in package.json) as a user's code
// would: list (depth 1 and 2), exists, getInfo, makeDir, rename, remove,
// their errors, and getMetrics. tests/integration/test_e2b.py runs it and
// asserts on the JSON summary it prints as its last line: one entry per
// step, {"thrown": ...} when the SDK threw where it should not have.
//
//   node fs.mjs --tag <unique tag>
//
// The sandbox it creates carries metadata {suite: tag} and is listed in the
// summary's "created".
import { createHash, randomBytes } from 'node:crypto'
import { Sandbox } from 'e2b'
import { suite } from './steps.mjs'

const args = process.argv.slice(2)
const tag = args[args.indexOf('--tag') + 1]
const { steps, created, summary, step, throws } = suite((e) => errInfo(e))

const errInfo = (e) => ({ name: e?.constructor?.name, message: String(e?.message ?? e) })
const sha = (b) => createHash('sha256').update(b).digest('hex')
// an EntryInfo as the summary shows it (modifiedTime as unix milliseconds, as the SDK's Date holds it)
const entry = (e) => ({ ...e, modifiedTime: e.modifiedTime ? e.modifiedTime.getTime() : null })

const s = await Sandbox.create({ metadata: { suite: tag }, timeoutMs: 300_000 })
created.push(s.sandboxId)
summary.sandbox = s.sandboxId
summary.startedAt = Math.floor(Date.now() / 1000)

// a tree: tree/a.txt, tree/b/c.txt, tree/b/d/e.txt, tree/link -> a.txt
const blob = randomBytes(300_000)
summary.blobSha = sha(blob)
await step('setup', async () => {
  await s.files.write([
    { path: 'tree/a.txt', data: 'alpha' },
    { path: 'tree/b/c.txt', data: 'gamma!' },
    { path: 'tree/b/d/e.txt', data: 'e' },
    { path: 'tree/blob.bin', data: blob },
  ])
  await s.commands.run('ln -s a.txt tree/link')
  return {}
})
await step('readBack', async () => {
  const back = await s.files.read('tree/blob.bin', { format: 'bytes' })
  return { size: back.length, sha: sha(Buffer.from(back)) }
})
await step('list1', async () => (await s.files.list('tree')).map(entry))
await step('list2', async () => (await s.files.list('/home/user/tree', { depth: 2 })).map((e) => e.path))
await step('list3', async () => (await s.files.list('tree', { depth: 3 })).map((e) => e.path))
await throws('listFile', () => s.files.list('tree/a.txt'))
await throws('listMissing', () => s.files.list('nope'))
await throws('listDepth0', () => s.files.list('tree', { depth: 0 }))

await step('exists', async () => ({
  file: await s.files.exists('tree/a.txt'),
  dir: await s.files.exists('tree/b'),
  missing: await s.files.exists('tree/zzz'),
}))
await step('infoFile', async () => entry(await s.files.getInfo('tree/b/c.txt')))
await step('infoDir', async () => entry(await s.files.getInfo('/home/user/tree/b')))
await step('infoLink', async () => entry(await s.files.getInfo('tree/link')))
// modifiedTime and mode against what the sandbox's stat says: a file, a
// directory, a symlink (its own mtime set apart), a dangling symlink
await step('infoVsStat', async () => {
  await s.commands.run("mkdir -p mt/d && echo x > mt/f && chmod 640 mt/f && ln -s f mt/l && ln -s nowhere mt/dangling" +
    " && touch -h -d '2024-05-01 10:00:00.123456789' mt/l && touch -d '2024-05-01 10:00:00.5' mt/d")
  const names = ['f', 'd', 'l', 'dangling']
  const st = await s.commands.run(`cd mt && stat -c '%n|%y|%a' ${names.join(' ')}`)
  const info = {}
  for (const n of names) info[n] = entry(await s.files.getInfo(`mt/${n}`))
  return { stat: st.stdout, info }
})
// a symlink's target as envd gives it (filepath.EvalSymlinks: absolute,
// every link followed; the link's own path when that fails), by getInfo and
// by list, and `readlink -f` as the sandbox user for comparison: relative,
// a chain, absolute, out of the home, a dangling one, a loop, one through a
// directory the user may not search, and /proc's magic links (the agent's
// own cwd, root and fds: never followed)
const linkNames = ['rel', 'chain', 'abs', 'up', 'home', 'dangling', 'loop1', 'shut', 'magic', 'magicroot', 'magicfd']
await step('linkTargets', async () => {
  await s.commands.run('mkdir -p lt/closed && echo s > lt/closed/s && cd lt && ln -s ../tree/a.txt rel && ln -s rel chain' +
    ' && ln -s /etc/passwd abs && ln -s ../../../../../etc up && ln -s /home/user home && ln -s nowhere dangling' +
    ' && ln -s loop2 loop1 && ln -s loop1 loop2 && ln -s closed/s shut && chmod 000 closed' +
    ' && ln -s /proc/self/cwd magic && ln -s /proc/1/root/etc magicroot && ln -s /proc/1/fd/0 magicfd')
  const rf = await s.commands.run(`cd lt && for n in ${linkNames.join(' ')}; do echo "$n|$(readlink -f $n)"; done`)
  const info = {}
  for (const n of linkNames) {
    const e = await s.files.getInfo(`lt/${n}`)
    info[n] = { type: e.type, target: e.symlinkTarget }
  }
  const list = {}
  for (const e of await s.files.list('lt')) list[e.name] = e.symlinkTarget ?? null
  return { readlinkF: Object.fromEntries(rf.stdout.trim().split('\n').map((l) => l.split('|'))), info, list }
})
await throws('infoMissing', () => s.files.getInfo('tree/zzz'))
await throws('infoBadPath', () => s.files.getInfo('../etc/passwd'))

await step('makeDir', async () => ({
  first: await s.files.makeDir('made/x/y'),
  again: await s.files.makeDir('made/x/y'),
  parent: await s.files.makeDir('made'),
  info: entry(await s.files.getInfo('made/x/y')),
}))
await throws('makeDirOnFile', () => s.files.makeDir('tree/a.txt'))

await step('rename', async () => {
  const moved = entry(await s.files.rename('tree/b/c.txt', 'tree/c-moved.txt'))
  return {
    moved,
    oldExists: await s.files.exists('tree/b/c.txt'),
    text: await s.files.read('tree/c-moved.txt'),
  }
})
await step('renameDir', async () => entry(await s.files.rename('made/x', '/home/user/x-moved')))
await throws('renameMissing', () => s.files.rename('tree/zzz', 'tree/yyy'))

await step('remove', async () => {
  await s.files.remove('tree/a.txt')
  await s.files.remove('tree/b') // a directory, with all it holds
  await s.files.remove('tree/never-was') // no error, as envd
  return { a: await s.files.exists('tree/a.txt'), b: await s.files.exists('tree/b'), list: (await s.files.list('tree')).map((e) => e.name) }
})
await throws('readMissing', () => s.files.read('tree/a.txt'))

// a path whose parents the sandbox user may not create: E2B's envd (root)
// would make /0 and chown it to the user; nanobox writes as the user only,
// so it refuses, and creates nothing (not /0, nothing under /etc)
await throws('writeUnderRoot', () => s.files.write('/0/x', 'x'))
await throws('writeUnderEtc', () => s.files.write('/etc/nb-new/x', 'x'))
await step('writeRefusedLeftNothing', async () => ({
  zero: await s.files.exists('/0'),
  etc: await s.files.exists('/etc/nb-new'),
}))

await step('metrics', async () => {
  const m = await s.getMetrics()
  return m.map((x) => ({ ...x, timestamp: Math.floor(x.timestamp.getTime() / 1000) }))
})

// file metadata (envd >= 0.6.2, which nanobox reports): X-Metadata-*
// headers on the upload become the file's user.* xattrs in the sandbox,
// reported by write, getInfo and list; over multipart and octet-stream,
// in the workspace and on /tmp (tmpfs)
const md = { 'owner-id': '42', note: 'a b c' }
const xattrs = (p) => s.commands.run(`python3 -c "import os,sys,json; p=sys.argv[1]; print(json.dumps({n: os.getxattr(p, n).decode() for n in os.listxattr(p)}))" ${p}`)
await step('metadataWrite', async () => {
  const w = await s.files.write('meta/a.txt', 'alpha', { metadata: md })
  await s.commands.run("python3 -c \"import os; os.setxattr('meta/a.txt', 'user.from-shell', b'yes')\"")
  const list = {}
  for (const e of await s.files.list('meta')) list[e.name] = e.metadata ?? null
  return {
    written: w.metadata ?? null,
    info: (await s.files.getInfo('meta/a.txt')).metadata ?? null,
    list,
    xattrs: JSON.parse((await xattrs('meta/a.txt')).stdout),
    plain: (await s.files.write('meta/plain.txt', 'p')).metadata ?? null,
  }
})
await step('metadataOctetStream', async () => {
  const stream = new ReadableStream({ start (c) { c.enqueue(new TextEncoder().encode('streamed')); c.close() } })
  const a = await s.files.write('meta/stream.txt', stream, { metadata: { k: 'v' } })
  const b = await s.files.write('/tmp/meta-tmp.txt', 'on tmpfs', { useOctetStream: true, metadata: { where: 'tmp' } })
  const gz = await s.files.write('meta/gz.txt', 'zipped '.repeat(1000), { gzip: true, metadata: { z: '1' } })
  return {
    stream: { path: a.path, metadata: a.metadata ?? null, text: await s.files.read('meta/stream.txt') },
    tmp: { metadata: b.metadata ?? null, info: (await s.files.getInfo('/tmp/meta-tmp.txt')).metadata ?? null, text: await s.files.read('/tmp/meta-tmp.txt') },
    tmpFs: (await s.commands.run('stat -f -c %T /tmp')).stdout.trim(),
    gzip: { metadata: gz.metadata ?? null, ok: (await s.files.read('meta/gz.txt')) === 'zipped '.repeat(1000) },
  }
})
// hostile metadata: namespaces other than user., keys and values past the
// caps, too many keys, a path the user may not write, a symlink out
// (a header name with a dot or an underscore never passes nginx: such a key is dropped)
await step('metadataNamespacedKeys', async () => {
  const w = await s.files.write('meta/ns.txt', 'x', { metadata: { 'trusted.overlay.opaque': 'y', 'security.capability': 'y', 'user.x': 'y', ok: '1' } })
  return { metadata: w.metadata ?? null, xattrs: JSON.parse((await xattrs('meta/ns.txt')).stdout) }
})
await throws('metadataLongKey', () => s.files.write('meta/t.txt', 'x', { metadata: { ['k'.repeat(129)]: 'v' } }))
await throws('metadataLongValue', () => s.files.write('meta/t.txt', 'x', { metadata: { k: 'v'.repeat(1025) } }))
await throws('metadataTooMany', () => s.files.write('meta/t.txt', 'x', { metadata: Object.fromEntries([...Array(17).keys()].map((i) => [`k${i}`, 'v'])) }))
await throws('metadataUnderEtc', () => s.files.write('/etc/nb-meta.txt', 'x', { metadata: { k: 'v' } }))
await step('metadataRefusedLeftNothing', async () => ({
  t: await s.files.exists('meta/t.txt'),
  etc: await s.files.exists('/etc/nb-meta.txt'),
}))
await step('metadataSymlinkOut', async () => {
  await s.commands.run('ln -sf /etc/passwd meta/pw')
  const w = await s.files.write('meta/pw', 'mine', { metadata: { k: 'v' } })
  const r = await s.commands.run('test -L meta/pw; echo $?; cat meta/pw; echo; head -c 5 /etc/passwd')
  return { type: w.type, metadata: w.metadata ?? null, out: r.stdout.split('\n'), passwdXattrs: JSON.parse((await xattrs('/etc/passwd')).stdout) }
})

console.log(JSON.stringify(summary))
