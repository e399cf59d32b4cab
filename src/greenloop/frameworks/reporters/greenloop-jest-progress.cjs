// greenloop's live-progress reporter for jest (`--reporters=default --reporters=<this file>`).
//
// One NDJSON line per finished test case (jest 29.6+ reports each case as its worker
// finishes it), appended to the file named by GREENLOOP_PROGRESS_FILE (the run's
// progress.ndjson), which greenloop tails for live progress. Jest reports skipped and todo
// tests only with their file, so those (and every case of a jest without per-case events)
// get their line when the file ends, one per test, matched by name and status against the
// lines already written (so a name shared by two tests, or two files running in parallel
// workers, is never counted twice). A file that failed to run is one failing line named
// after the file. Counts are written only for results jest gives no test list for. Without
// the variable it does nothing.
const fs = require('node:fs')
const nodePath = require('node:path')

const STATUS = { passed: 'pass', failed: 'fail', pending: 'skip', skipped: 'skip', todo: 'skip', disabled: 'skip' }

class GreenloopProgress {
  constructor() {
    this.fd = null
    this.seen = new Map() // test file -> lines already written for its cases
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

  written(file) {
    // test file -> "status\0full name" -> lines already written for it
    let w = this.seen.get(file)
    if (!w) {
      w = new Map()
      this.seen.set(file, w)
    }
    return w
  }

  onTestCaseResult(test, result) {
    const status = STATUS[result.status]
    if (!status) return
    const w = this.written(test.path)
    const key = status + '\0' + result.fullName
    w.set(key, (w.get(key) || 0) + 1)
    this.write({ status, test: result.fullName, file: test.path })
  }

  onTestFileResult(test, result) {
    const w = this.written(test.path)
    this.seen.delete(test.path)
    const cases = Array.isArray(result.testResults) ? result.testResults : []
    const lines = { pass: 0, fail: 0, skip: 0 }
    for (const c of cases) {
      const status = STATUS[c.status]
      if (!status) continue
      lines[status] += 1
      const key = status + '\0' + c.fullName
      const before = w.get(key) || 0
      if (before > 0) {
        w.set(key, before - 1)
        continue
      }
      this.write({ status, test: c.fullName, file: test.path })
    }
    if (result.testExecError && !result.numFailingTests) {
      // the file failed to run, or the worker running it died: one failure, as jest counts it
      const name = nodePath.relative(process.cwd(), test.path) || test.path
      this.write({ status: 'fail', test: name, file: test.path })
      lines.fail += 1
    }
    const total = {
      pass: result.numPassingTests || 0,
      fail: (result.numFailingTests || 0) + (result.testExecError && !result.numFailingTests ? 1 : 0),
      skip: (result.numPendingTests || 0) + (result.numTodoTests || 0),
    }
    for (const status of ['pass', 'fail', 'skip']) {
      const missing = total[status] - lines[status]
      if (missing > 0) this.write({ status, count: missing, file: test.path })
    }
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
