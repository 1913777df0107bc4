// Drives a sandbox's browser through the worker API as docs/browser.md
// shows: Playwright's connectOverCDP with the worker's URL and token, a page
// served inside the sandbox, its text and a screenshot. It prints one JSON
// line: {"text", "userAgent", "screenshotBytes"}.
//
//   BROWSER_URL=ws://…/v1/sandboxes/ID/browser WORKER_TOKEN=… PAGE_URL=http://127.0.0.1:8000/ node connect.mjs
import { chromium } from 'playwright-core';

const browser = await chromium.connectOverCDP(process.env.BROWSER_URL, {
  headers: { Authorization: `Bearer ${process.env.WORKER_TOKEN}` },
  timeout: 60000,
});
const page = await browser.contexts()[0].newPage();
for (let tries = 0; ; tries++) { // the page server may still be starting
  try {
    await page.goto(process.env.PAGE_URL, { timeout: 30000 });
    break;
  } catch (e) {
    if (tries > 50) throw e;
    await new Promise((r) => setTimeout(r, 200));
  }
}
const text = await page.textContent('#text');
const userAgent = await page.evaluate(() => navigator.userAgent);
const shot = await page.screenshot();
console.log(JSON.stringify({ text, userAgent, screenshotBytes: shot.length }));
await browser.close();
