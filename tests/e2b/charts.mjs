// charts.mjs - the code interpreter's structured results through the
// official @e2b/code-interpreter SDK (pinned in package.json): a
// matplotlib figure's `chart` beside its PNG (line with a datetime axis,
// bar, pie, scatter, box and whisker, a superchart of two axes, log and
// categorical scales, an unknown figure), a DataFrame's `data`, the
// PNG of a figure saved with savefig and then shown, and PIL images shown
// and saved.
// tests/integration/test_e2b.py runs it and asserts on the JSON summary
// it prints as its last line: one entry per step, {"thrown": ...} when the
// SDK threw.
//
//   node charts.mjs --tag <unique tag>
import { Sandbox } from '@e2b/code-interpreter'
import { suite } from './steps.mjs'

const args = process.argv.slice(2)
const tag = args[args.indexOf('--tag') + 1]
const { created, summary, step } = suite((e) => ({ name: e?.constructor?.name, message: String(e?.message ?? e) }))

const c = await Sandbox.create({ metadata: { suite: tag }, timeoutMs: 300_000 })
created.push(c.sandboxId)
summary.codeSandbox = c.sandboxId

// what a test needs of a run: each result's formats, chart and data, a PNG's first bytes
const results = (e) => ({
  error: e.error ? { name: e.error.name, value: e.error.value } : null,
  stdout: e.logs.stdout,
  results: e.results.map((r) => ({
    formats: r.formats(),
    isMainResult: r.isMainResult,
    chart: r.chart ?? null,
    data: r.data ?? null,
    pngMagic: r.png ? Buffer.from(r.png, 'base64').subarray(0, 8).toString('hex') : null,
  })),
})
const run = async (name, code) => step(name, async () => results(await c.runCode(code)))

await run('line', `
import numpy as np
import matplotlib.pyplot as plt
import datetime

dates = [datetime.date(2023, 9, 1) + datetime.timedelta(days=i) for i in range(100)]
x = np.linspace(0, 2 * np.pi, 100)
plt.figure(figsize=(6, 4))  # a PNG within the test stack's max_output (64 KiB)
plt.plot(dates, np.sin(x), label='sin(x)')
plt.plot(dates, np.cos(x), label='cos(x)')
plt.xlabel("Time (s)")
plt.ylabel("Amplitude (Hz)")
plt.title('Plot of sin(x) and cos(x)')
plt.show()
`)

await run('bar', `
import matplotlib.pyplot as plt

authors = ['Author A', 'Author B', 'Author C', 'Author D']
sales = [100, 200, 300, 400]
plt.figure(figsize=(10, 6))
plt.bar(authors, sales, label='Books Sold', color='blue')
plt.xlabel('Authors')
plt.ylabel('Number of Books Sold')
plt.title('Book Sales by Authors')
plt.tight_layout()
plt.show()
`)

await run('pie', `
import matplotlib.pyplot as plt

fig, ax = plt.subplots(figsize=(8, 8))
ax.pie([90, 10], labels=["No", "No, in blue"], autopct='%1.1f%%', startangle=90)
ax.axis('equal')
plt.title('Will I wake up early tomorrow?')
plt.show()
`)

// indented as E2B's own tests send it
await run('scatter', `
    import matplotlib.pyplot as plt
    import numpy as np

    plt.xlabel("A")
    plt.ylabel("B")
    plt.scatter(np.random.rand(5), np.random.rand(5), c='blue', label='Dataset 1')
    plt.scatter(np.random.rand(10), np.random.rand(10), c='red', label='Dataset 2')
    plt.show()
    `)

await run('box', `
import matplotlib.pyplot as plt

data = {
    'Class A': [85, 90, 78, 92, 88],
    'Class B': [95, 89, 76, 91, 84, 87],
    'Class C': [75, 82, 88, 79, 86]
}
fig, ax = plt.subplots(figsize=(10, 6))
ax.set_title('Exam Scores Distribution')
ax.set_xlabel('Class')
ax.set_ylabel('Score')
ax.boxplot(data.values(), labels=data.keys(), patch_artist=True)
plt.tight_layout()
plt.show()
`)

await run('superchart', `
import matplotlib.pyplot as plt
import numpy as np

x1 = np.linspace(0, 10, 100)
fig, axs = plt.subplots(1, 2, figsize=(8, 4))  # within the test stack's 64 KiB max_output
fig.suptitle('Multiple Charts Example', fontsize=16)
axs[0].plot(x1, np.sin(x1), 'r')
axs[0].set_title('Sine Wave')
axs[0].grid(True)
axs[1].scatter(np.random.rand(5), np.random.rand(5), c='blue', label='Dataset 1')
axs[1].set_xlabel('X')
axs[1].set_ylabel('Y')
axs[1].set_title('Scatter Plot')
axs[1].grid(True)
plt.show()
`)

await run('log', `
import numpy as np
import matplotlib.pyplot as plt

x = np.linspace(0, 100, 100)
plt.figure(figsize=(10, 6))
plt.plot(x, np.exp(x), label='y = e^x')
plt.yscale('log')
plt.xlabel('X-axis')
plt.ylabel('Y-axis (log scale)')
plt.title('Chart with Log Scale on Y-axis')
plt.legend()
plt.grid(True)
plt.show()
`)

await run('categorical', `
    import matplotlib.pyplot as plt

    plt.figure(figsize=(10, 6))
    plt.plot([1, 2, 3, 4, 5], ['A', 'B', 'C', 'D', 'E'])
    plt.show()
    `)

await run('unknown', `
import matplotlib.pyplot as plt

fig, ax = plt.subplots()
ax.add_artist(plt.Circle((0, 0), 1, color='blue', fill=False, linewidth=2))
ax.add_artist(plt.Circle((0, 0), 2, color='red', fill=False, linewidth=2))
ax.grid(True)
plt.title('Two Concentric Circles')
plt.show()
`)

await run('dataframe', `
import pandas as pd
pd.DataFrame({"a": [1, 2, 3], "when": pd.to_datetime(["2024-01-01", "2024-01-02", None])})
`)

await run('savefigShow', `
import os
import matplotlib.pyplot as plt

plt.figure()
plt.plot([1, 2, 3], [3, 1, 2], label='saved')
plt.savefig('chart.png')
plt.show()
print(os.path.getsize('chart.png') > 0)
`)

// E2B's image tests: a PIL image shown, as the value, and saved to a file
await run('pilShow', `
    import numpy
    from PIL import Image

    image = Image.fromarray((numpy.random.rand(16, 16, 3) * 255).astype('uint8')).convert('RGBA')
    image.show()
    print("done")
    `)
await run('pilSave', `
    import numpy
    from PIL import Image

    image = Image.fromarray((numpy.random.rand(16, 16, 3) * 255).astype('uint8')).convert('RGBA')
    image.save("test.png")
    `)

// the sandbox stays for the test to look at; its teardown kills it
console.log(JSON.stringify(summary))
