// greenloop's live-progress reporter for jest (`--reporters=default --reporters=<this file>`).
//
// One NDJSON line per finished test case (jest 29.6+ reports each case as its worker
// finishes it), appended to the file named by GREENLOOP_PROGRESS_FILE (the run's
// progress.ndjson), which greenloop tails for live progress. Jest reports skipped and todo
// tests only with their file, so those (and every case of a jest without per-case events)
// are written as counts when the file ends. Without the variable it does nothing.
const fs = require('node:fs')

const STATUS = { passed: 'pass', failed: 'fail', pending: 'skip', skipped: 'skip', todo: 'skip', disabled: 'skip' }

class GreenloopProgress {
  constructor() {
    this.fd = null
    this.seen = new Map() // test file -> {pass, fail, skip} already written
    const path = process.env.GREENLOOP_PROGRESS_FILE
    if (path) {
      try {
        this.fd = fs.openSync(path, 'a')
      } catch {
        this.fd = null
      }
    }
  }

  write(record) {
    if (this.fd === null) return
    try {
      fs.writeSync(this.fd, JSON.stringify(record) + '\n')
    } catch {
      // a full disk loses progress lines, never the run
    }
  }

  counts(path) {
    let c = this.seen.get(path)
    if (!c) {
      c = { pass: 0, fail: 0, skip: 0 }
      this.seen.set(path, c)
    }
    return c
  }

  onTestCaseResult(test, result) {
    const status = STATUS[result.status]
    if (!status) return
    this.counts(test.path)[status] += 1
    this.write({ status, test: result.fullName, file: test.path })
  }

  onTestFileResult(test, result) {
    const c = this.counts(test.path)
    const total = {
      pass: result.numPassingTests || 0,
      fail: (result.numFailingTests || 0) + (result.testExecError && !result.numFailingTests ? 1 : 0),
      skip: (result.numPendingTests || 0) + (result.numTodoTests || 0),
    }
    for (const status of ['pass', 'fail', 'skip']) {
      const missing = total[status] - c[status]
      if (missing > 0) this.write({ status, count: missing, file: test.path })
    }
    this.seen.delete(test.path)
  }

  onRunComplete() {
    if (this.fd !== null) {
      try {
        fs.closeSync(this.fd)
      } catch {}
      this.fd = null
    }
  }

  getLastError() {
    return undefined
  }
}

module.exports = GreenloopProgress
