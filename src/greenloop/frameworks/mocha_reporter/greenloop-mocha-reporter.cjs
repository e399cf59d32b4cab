'use strict'
// greenloop's mocha reporter: mocha's own spec reporter on stdout (what a person reads, and
// greenloop's text fallback) and, beside it, one JSON report written when the run ends.
// Mocha takes a single --reporter, so this file is both. It requires nothing from greenloop:
// the spec reporter comes from the mocha that is running (found in the module cache, else
// resolved from the working folder), so it works with any project's mocha 8 or later.
//
//   --reporter <this file> --reporter-option output=<path>   (or GREENLOOP_MOCHA_REPORT=<path>)
//
// The report has mocha's JSON reporter's shape (stats, pending, failures, passes; no `tests`
// list, which repeats the others) and adds to each test its title path (describe titles, then
// the test's) and whether it is a hook; a passing test keeps only its title path and file.
const fs = require('node:fs')
const path = require('node:path')

function runningMocha () {
  for (const key of Object.keys(require.cache)) {
    if (/[\\/]mocha[\\/]lib[\\/]mocha\.c?js$/.test(key)) {
      const mod = require.cache[key].exports
      if (mod && mod.reporters) return mod
    }
  }
  try {
    const where = require.resolve('mocha', { paths: [process.cwd()] })
    const mod = require(where)
    return mod.reporters ? mod : mod.default
  } catch (err) {
    return null
  }
}

function opened (file) {
  try {
    return file ? fs.openSync(file, 'a') : null
  } catch (e) {
    return null // no record: a stopped run then has only its text output
  }
}

function errorOf (err) {
  if (!err || typeof err !== 'object') return err === undefined ? {} : { message: String(err) }
  const out = {}
  for (const key of ['name', 'message', 'stack', 'code', 'operator', 'generatedMessage', 'showDiff']) {
    if (err[key] !== undefined) out[key] = typeof err[key] === 'string' ? err[key] : err[key]
  }
  for (const key of ['actual', 'expected']) {
    if (key in err) out[key] = show(err[key])
  }
  return out
}

function show (value) {
  if (typeof value === 'string') return value
  try {
    const text = JSON.stringify(value, null, 2)
    return text === undefined ? String(value) : text
  } catch (e) {
    return String(value)
  }
}

function titles (test) {
  return typeof test.titlePath === 'function' ? test.titlePath() : [test.title]
}

function entry (test) {
  return {
    title: test.title,
    fullTitle: typeof test.fullTitle === 'function' ? test.fullTitle() : test.title,
    titlePath: titles(test),
    file: test.file || (test.parent && test.parent.file) || null,
    hook: test.type === 'hook',
    duration: test.duration,
    state: test.state || null,
    err: errorOf(test.err)
  }
}

function GreenloopReporter (runner, options) {
  const opts = options || {}
  const given = opts.reporterOption || opts.reporterOptions || {}
  const output = given.output || process.env.GREENLOOP_MOCHA_REPORT
  const mocha = runningMocha()
  if (mocha && mocha.reporters && mocha.reporters.Spec) {
    this.spec = new mocha.reporters.Spec(runner, opts)
    this.stats = this.spec.stats
  }
  // a line per test (and hook) as it starts, so a run stopped at its deadline can say which
  // one was running (the spec reporter prints a test only once it has finished). mocha runs
  // one thing at a time, so a start also ends what ran before ("serial"), and the run's end
  // closes the last: one write per test instead of two. The write is synchronous and comes
  // before the test's body runs: a test stuck in a loop never lets a timer flush a buffer.
  // Each line is JSON.stringify({start, file, serial: true}) written out by hand, its file
  // part encoded once per file.
  const stream = opened(process.env.GREENLOOP_MOCHA_STREAM)
  let last = null // the test (or hook) that started last, and its title path: a pass reuses it
  let lastTitles = null
  const passes = []
  if (stream !== null) {
    const fileParts = new Map()
    const write = (text) => {
      try { fs.writeSync(stream, text) } catch (e) { /* a full disk never fails the run */ }
    }
    const start = (test) => {
      const file = test.file || null
      let part = fileParts.get(file)
      if (part === undefined) {
        part = ',"file":' + JSON.stringify(file) + ',"serial":true}\n'
        fileParts.set(file, part)
      }
      last = test
      lastTitles = titles(test)
      write('{"start":' + JSON.stringify(lastTitles.join(' > ')) + part)
    }
    runner.on('test', start)
    runner.on('hook', start)
    runner.once('end', () => write('{"done":true}\n'))
  }
  const pending = []
  const failures = []
  // a passing test keeps only its title path and file: a green run of thousands stays cheap
  runner.on('pass', (test) => {
    passes.push({ titlePath: test === last ? lastTitles : titles(test), file: test.file || null })
  })
  runner.on('pending', (test) => { pending.push(entry(test)) })
  runner.on('fail', (test, err) => {
    const e = entry(test)
    if (err !== undefined) e.err = errorOf(err)
    failures.push(e)
  })
  runner.once('end', () => {
    if (!output) return
    const stats = runner.stats || (this.spec && this.spec.stats) || {}
    const report = { greenloop: 1, stats, pending, failures, passes }
    try {
      fs.mkdirSync(path.dirname(output), { recursive: true })
      const tmp = output + '.tmp'
      fs.writeFileSync(tmp, JSON.stringify(report))
      fs.renameSync(tmp, output)
    } catch (err) {
      process.stderr.write('greenloop mocha reporter: cannot write ' + output + ': ' + err.message + '\n')
    }
  })
}

GreenloopReporter.prototype.done = function (failures, fn) {
  if (this.spec && typeof this.spec.done === 'function') return this.spec.done(failures, fn)
  fn(failures)
}

GreenloopReporter.description = 'spec on stdout and a JSON report (greenloop)'
module.exports = GreenloopReporter
