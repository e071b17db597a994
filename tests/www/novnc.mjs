// novnc.mjs - loads a desktop sandbox's noVNC stream URL (what
// @e2b/desktop's stream.getUrl() gives, made reachable on the test stack)
// in Debian's chromium with playwright-core, and reports whether noVNC
// connected to the sandbox's VNC server through nanobox's port proxy: its
// page's <html> gets the class noVNC_connected and its status names the
// desktop; the canvas is the screen's size. tests/integration/test_e2b_desktop.py
// runs it and asserts on the JSON it prints as its last line.
//
//   node novnc.mjs --url URL --chromium /usr/bin/chromium [--wait MS]
import { chromium } from 'playwright-core'

const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, a, i, all) => (a.startsWith('--') ? [...acc, [a.slice(2), all[i + 1]]] : acc), [])
)
const out = { url: args.url }
const browser = await chromium.launch({ executablePath: args.chromium || '/usr/bin/chromium', args: ['--no-sandbox'] })
try {
  const page = await browser.newPage({ viewport: { width: 1024, height: 768 } })
  const resp = await page.goto(args.url, { waitUntil: 'load', timeout: 30_000 })
  out.status = resp?.status()
  out.title = await page.title()
  try {
    await page.waitForSelector('html.noVNC_connected', { timeout: Number(args.wait || 30000) })
    out.connected = true
  } catch (e) {
    out.connected = false
  }
  out.statusText = await page.evaluate(() => document.getElementById('noVNC_status')?.textContent ?? '')
  out.canvas = await page.evaluate(() => {
    const c = document.querySelector('#noVNC_container canvas')
    return c ? { width: c.width, height: c.height } : null
  })
  out.viewOnly = await page.evaluate(() => document.getElementById('noVNC_setting_view_only')?.checked ?? null)
} finally {
  await browser.close()
}
console.log(JSON.stringify(out))
