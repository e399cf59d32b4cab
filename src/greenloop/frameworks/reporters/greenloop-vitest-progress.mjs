// greenloop's live-progress reporter for vitest 3+ (`--reporter=<this file>`, beside the
// default and JSON reporters).
//
// One NDJSON line per finished test case, appended the moment vitest reports it to the file
// named by GREENLOOP_PROGRESS_FILE (the run's progress.ndjson), which greenloop tails for live
// progress. Without the variable it does nothing.
//
// The same file is what `--mode resume` reads when greenloop stopped before the run ended:
// the run's test files as vitest planned them ({"files": [...]}, once at the start), and a
// {"file_done": path, "state": …} line when a file has finished (with its errors outside any
// test: a file that could not load), so the files that finished are kept and only the others
// run again. A failing test's line carries its first error's message and stack.
//
// vitest's unhandled errors fail the run and greenloop counts each as a failure, so each gets
// one failing line at the end of the run; a worker that died inside a file (a test killed its
// process) is one such error, named after that file when it is the only file with tests that
// never reported.
import fs from 'node:fs'
import path from 'node:path'

const STATUS = { passed: 'pass', failed: 'fail', skipped: 'skip' }
// vitest's error for a worker that exited inside a test file
const DEAD_WORKER = /Worker exited unexpectedly|Worker \w+ emitted error|\[vitest-pool\]/

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
    if (this.fd === null) return
    try {
      fs.writeSync(this.fd, JSON.stringify(record) + '\n')
    } catch {
      // a full disk loses progress lines, never the run
    }
  }

  onTestRunStart(specifications) {
    this.write({ files: [...new Set((specifications || []).map((s) => s.moduleId))] })
  }

  onTestCaseResult(testCase) {
    if (this.fd === null) return
    const result = testCase.result()
    const status = STATUS[result.state]
    if (!status) return // pending: not finished
    const record = { status, test: testCase.fullName, file: testCase.module?.moduleId ?? null }
    const error = status === 'fail' ? (result.errors || [])[0] : undefined
    if (error) {
      record.message = String(error.message ?? '').slice(0, 4000)
      record.stack = String(error.stack ?? '').slice(0, 4000)
    }
    this.write(record)
  }

  onTestModuleEnd(testModule) {
    if (this.fd === null) return
    const errors = (testModule.errors?.() || []).map((e) => String(e.message ?? e))
    this.write({ file_done: testModule.moduleId, state: testModule.state?.() ?? null, errors })
  }

  onTestRunEnd(testModules, unhandledErrors, reason) {
    if (this.fd !== null && reason !== 'interrupted') {
      const unfinished = []
      for (const mod of testModules || []) {
        try {
          if ([...mod.children.allTests()].some((t) => t.result().state === 'pending')) unfinished.push(mod.moduleId)
        } catch {
          // a vitest without this API: the error keeps its own name
        }
      }
      const errors = unhandledErrors || []
      const dead = errors.filter((e) => DEAD_WORKER.test(String(e?.message) + String(e?.cause?.message)))
      for (const e of errors) {
        const named = dead.length === 1 && e === dead[0] && unfinished.length === 1
        const file = named ? unfinished[0] : null
        const test = file ? path.relative(process.cwd(), file) || file : `unhandled error: ${e?.message ?? e}`
        this.write({ status: 'fail', test, file })
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
