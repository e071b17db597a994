// cluster_templates.mjs - E2B's Template SDK against a nanobox cluster's
// front (docs/E2B.md, "Templates"; docs/CLUSTER.md, "Templates on every
// node"): the official SDK builds a template whose calls the front spreads
// over the nodes (each copy is a link and an upload, then the build and its
// status polls), with files copied and a command run, under an alias; then
// Template.exists through the front.
// tests/integration/test_cluster_e2b_templates.py runs it and asserts on
// the JSON summary it prints as its last line.
//
//   node cluster_templates.mjs --tag <unique tag>
//
// The alias is tpl-<tag>; the test removes the template.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { Template } from 'e2b'
import { suite } from './steps.mjs'

const args = process.argv.slice(2)
const tag = args[args.indexOf('--tag') + 1]
const { summary, step } = suite((e) => ({ name: e?.constructor?.name, message: String(e?.message ?? e) }))
const alias = `tpl-${tag}`

// the build context: three files, each its own copy (its own upload)
const ctx = fs.mkdtempSync(path.join(os.tmpdir(), 'nb-e2b-ctpl-'))
for (const n of ['one', 'two', 'three']) fs.writeFileSync(path.join(ctx, `${n}.txt`), `${n} ${tag}\n`)

const logs = []
await step('build', async () => {
  const t = Template({ fileContextPath: ctx })
    .fromImage('nanobox:latest')
    .copy('one.txt', '/opt/one.txt')
    .copy('two.txt', '/opt/two.txt')
    .copy('three.txt', '/opt/three.txt')
    .runCmd(`echo built-${tag} > /etc/nb-ctpl-marker`)
  const info = await Template.build(t, alias, { onBuildLogs: (l) => logs.push(String(l.message ?? l)) })
  return { alias, templateId: info.templateId, buildId: info.buildId,
    sawStep: logs.some((l) => l.includes('nb-ctpl-marker')) }
})
await step('exists', async () => ({ exists: await Template.exists(alias) }))

fs.rmSync(ctx, { recursive: true, force: true })
console.log(JSON.stringify(summary))
