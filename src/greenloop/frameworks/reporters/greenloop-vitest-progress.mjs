// greenloop's live-progress reporter for vitest 3+ (`--reporter=<this file>`, beside the
// default and JSON reporters).
//
// One NDJSON line per finished test case, appended the moment vitest reports it to the file
// named by GREENLOOP_PROGRESS_FILE (the run's progress.ndjson), which greenloop tails for live
// progress. Without the variable it does nothing.
import fs from 'node:fs'

const STATUS = { passed: 'pass', failed: 'fail', skipped: 'skip' }

export default class GreenloopProgress {
  constructor() {
    this.fd = null
    const path = process.env.GREENLOOP_PROGRESS_FILE
    if (path) {
      try {
        this.fd = fs.openSync(path, 'a')
      } catch {
        this.fd = null // no progress, never a broken run
      }
    }
  }

  onTestCaseResult(testCase) {
    if (this.fd === null) return
    const state = testCase.result().state
    const status = STATUS[state]
    if (!status) return // pending: not finished
    const line = JSON.stringify({ status, test: testCase.fullName, file: testCase.module?.moduleId ?? null })
    try {
      fs.writeSync(this.fd, line + '\n')
    } catch {
      // a full disk loses progress lines, never the run
    }
  }

  onTestRunEnd() {
    if (this.fd !== null) {
      try {
        fs.closeSync(this.fd)
      } catch {}
      this.fd = null
    }
  }
}
