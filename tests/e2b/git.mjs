// git.mjs - sbx.git.* (the SDK runs git through commands.run) against the
// sandbox image's git, driven by the official SDK (npm e2b) as a user's code
// would: init, configureUser, add, commit, status, branches, createBranch.
// tests/integration/test_image_tools.py runs it and asserts on the JSON
// summary its last line prints.
//
//   node git.mjs --tag <unique tag>
import { Sandbox } from 'e2b'
import { suite } from './steps.mjs'

const args = process.argv.slice(2)
const tag = args[args.indexOf('--tag') + 1]
const errInfo = (e) => ({ name: e?.constructor?.name, message: String(e?.message ?? e) })
const { created, summary, step } = suite(errInfo)

const s = await Sandbox.create({ metadata: { suite: tag }, timeoutMs: 300_000 })
created.push(s.sandboxId)
summary.sandbox = s.sandboxId
const repo = 'repo'

await step('init', async () => ({ exit: (await s.git.init(repo, { initialBranch: 'main' })).exitCode }))
await step('user', async () => {
  await s.git.configureUser('Sandbox User', 'sandbox@example.com')
  return { email: (await s.git.getConfig('user.email')) ?? null }
})
await step('commit', async () => {
  await s.files.write(`${repo}/a.txt`, 'hello\n')
  await s.git.add(repo)
  const c = await s.git.commit(repo, 'first')
  const log = await s.commands.run(`git -C ${repo} log --format='%an <%ae> %s'`)
  return { exit: c.exitCode, log: log.stdout.trim() }
})
await step('status', async () => {
  await s.files.write(`${repo}/b.txt`, 'new\n')
  const st = await s.git.status(repo)
  return { branch: st.currentBranch ?? null, files: (st.fileStatus ?? []).map((f) => f.name) }
})
await step('branches', async () => {
  await s.git.createBranch(repo, 'feature')
  return await s.git.branches(repo)
})

console.log(JSON.stringify(summary))
