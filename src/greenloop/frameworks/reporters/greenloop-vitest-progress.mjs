// greenloop's live-progress reporter for vitest 3+ (`--reporter=<this file>`, beside the
// default and JSON reporters).
//
// One NDJSON line per finished test case, appended the moment vitest reports it to the file
// named by GREENLOOP_PROGRESS_FILE (the run's progress.ndjson), which greenloop tails for live
// progress. A file whose worker died (a test killed its process) reports none of its tests:
// at the end of the run it gets one failing line named after the file, as greenloop counts
// it. Without the variable it does nothing.
import fs from 'node:fs'
import path from 'node:path'

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

  write(record) {
    try {
      fs.writeSync(this.fd, JSON.stringify(record) + '\n')
    } catch {
      // a full disk loses progress lines, never the run
    }
  }

  onTestCaseResult(testCase) {
    if (this.fd === null) return
    const state = testCase.result().state
    const status = STATUS[state]
    if (!status) return // pending: not finished
    this.write({ status, test: testCase.fullName, file: testCase.module?.moduleId ?? null })
  }

  onTestRunEnd(testModules, _errors, reason) {
    if (this.fd !== null && reason !== 'interrupted') {
      for (const mod of testModules || []) {
        let pending = 0
        try {
          for (const t of mod.children.allTests()) if (t.result().state === 'pending') pending += 1
        } catch {
          continue // a vitest without this API: no line for the file
        }
        if (pending > 0) {
          const file = mod.moduleId
          this.write({ status: 'fail', test: path.relative(process.cwd(), file) || file, file })
        }
      }
    }
    if (this.fd !== null) {
      try {
        fs.closeSync(this.fd)
      } catch {}
      this.fd = null
    }
  }
}
