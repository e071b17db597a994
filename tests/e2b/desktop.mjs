// desktop.mjs - a computer-use desktop on nanobox, driven by E2B's official
// desktop SDK (npm @e2b/desktop, pinned in package.json) unchanged, as an
// agent would: create from its default template ("desktop", nanobox's
// nanobox-desktop image) at a resolution of its own, the screen size, a
// screenshot (a PNG of that size), the mouse (move, position read back,
// clicks, scroll, drag), the keyboard (a terminal window launched, a line
// typed into it and read back from the file it wrote and from the window's
// title), windows, open(), and stream.start() whose URL
// tests/integration/test_e2b_desktop.py then loads in headless Chromium.
//
//   node desktop.mjs --tag <unique tag> [--keep] [--auth]
//
// Its sandbox carries metadata {suite: tag}; with --keep it is left
// running (the summary's "created") for the driver to load the stream and
// remove it. The summary is the last line printed: one entry per step,
// {"thrown": ...} when the SDK threw.
import { Sandbox } from '@e2b/desktop'
import { suite } from './steps.mjs'

const args = process.argv.slice(2)
const tag = args[args.indexOf('--tag') + 1]
const keep = args.includes('--keep')
const { created, summary, step } = suite((e) => errInfo(e))

const errInfo = (e) => ({
  name: e?.constructor?.name, message: String(e?.message ?? e),
  ...(e?.exitCode !== undefined && { exitCode: e.exitCode, stdout: e.stdout, stderr: e.stderr }),
})
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

// A PNG's signature and its IHDR's width and height.
function pngInfo (bytes) {
  const b = Buffer.from(bytes)
  const sig = b.subarray(0, 8).toString('hex') === '89504e470d0a1a0a'
  return { png: sig, width: b.readUInt32BE(16), height: b.readUInt32BE(20), bytes: b.length }
}

// poll fn until it gives something truthy (or the time is up): its last value
async function until (fn, ms = 30_000) {
  const end = Date.now() + ms
  let v
  while (Date.now() < end) {
    try { v = await fn() } catch (e) { v = null }
    if (v) return v
    await sleep(300)
  }
  return v
}

const W = 800
const H = 600
let sbx
const t0 = Date.now()
await step('create', async () => {
  sbx = await Sandbox.create({ resolution: [W, H], metadata: { suite: tag }, timeoutMs: 300_000 })
  created.push(sbx.sandboxId)
  return { id: sbx.sandboxId.length, display: sbx.display }
})
summary.createMs = Date.now() - t0
if (!sbx) {
  console.log(JSON.stringify(summary))
  process.exit(0)
}

// --auth: only a stream with noVNC's password (requireAuth), for the driver
// to load with the key and without it
if (args.includes('--auth')) {
  await step('streamAuth', async () => {
    await sbx.stream.start({ requireAuth: true })
    const authKey = sbx.stream.getAuthKey()
    return { keyLength: authKey.length, url: sbx.stream.getUrl({ authKey }), urlWithoutKey: sbx.stream.getUrl() }
  })
  console.log(JSON.stringify(summary))
  if (!keep) await sbx.kill()
  process.exit(0)
}

await step('info', async () => ({ templateId: (await sbx.getInfo()).templateId }))
await step('screenSize', async () => await sbx.getScreenSize())
await step('screenshot', async () => pngInfo(await sbx.screenshot()))
const shot1 = await sbx.screenshot().catch(() => null)

await step('mouse', async () => {
  await sbx.moveMouse(123, 234)
  const a = await sbx.getCursorPosition()
  await sbx.leftClick(300, 200)
  const b = await sbx.getCursorPosition()
  await sbx.doubleClick()
  await sbx.rightClick(50, 60)
  await sbx.press('escape')
  await sbx.middleClick()
  await sbx.scroll('down', 2)
  await sbx.scroll('up')
  await sbx.drag([10, 10], [200, 150])
  const c = await sbx.getCursorPosition()
  await sbx.mousePress('left')
  await sbx.mouseRelease('left')
  return { moved: a, clicked: b, dragged: c }
})

// a terminal: launched by its desktop entry, a line typed into it
const word = `typed-${tag.slice(-8)}`
await step('terminal', async () => {
  await sbx.launch('xfce4-terminal')
  const wins = await until(async () => {
    const w = await sbx.getApplicationWindows('xfce4-terminal')
    return w.filter((x) => x).length ? w : null
  })
  const win = wins[wins.length - 1]
  await sbx.commands.run(`xdotool windowactivate --sync ${win}`)
  await sleep(500)
  // the line writes a file and sets the window's title, then waits (so
  // that no prompt sets it back)
  await sbx.write(`echo ${word} > /tmp/typed.txt; printf '\\033]0;%s\\007' title-${word}; sleep 600`)
  await sbx.press('enter')
  const typed = await until(async () => (await sbx.commands.run('cat /tmp/typed.txt 2>/dev/null || true')).stdout.trim())
  const title = await until(async () => {
    const t = await sbx.getWindowTitle(win)
    return t.includes('title-') ? t : null
  }, 10_000)
  const focused = await sbx.getCurrentWindowId()
  return { windows: wins.length, typed, title, focusedIsTerminal: focused === win }
})
await step('secondScreenshot', async () => {
  const shot2 = await sbx.screenshot()
  return { ...pngInfo(shot2), differs: shot1 !== null && Buffer.compare(Buffer.from(shot1), Buffer.from(shot2)) !== 0 }
})
await step('keys', async () => {
  await sbx.press(['ctrl', 'c']) // ends the terminal's sleep
  return {}
})

// open(): xdg-open's default application; a text file goes to the browser
await step('open', async () => {
  await sbx.files.write('/home/user/page.html', '<title>opened-by-sdk</title><h1>hello</h1>')
  await sbx.open('/home/user/page.html')
  const wins = await until(async () => {
    const w = (await sbx.commands.run('xdotool search --onlyvisible --class firefox || true')).stdout.trim()
    return w || null
  }, 60_000)
  return { browserWindow: Boolean(wins) }
})

await step('stream', async () => {
  await sbx.stream.start()
  const url = sbx.stream.getUrl()
  const viewOnly = sbx.stream.getUrl({ viewOnly: true })
  return { url, viewOnly }
})

console.log(JSON.stringify(summary))
// the stream's noVNC command stays connected (the SDK keeps its handle to
// stop it): exit rather than wait for it
if (!keep) await sbx.kill()
process.exit(0)
