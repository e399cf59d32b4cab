// greenloop's node:test reporter: node's own TAP reporter (greenloop's report of the run),
// plus a record of each test as it starts and completes, appended to the file named by
// GREENLOOP_NODE_STREAM, one JSON line each.
//
// Why: node reports a test file's results in order, after the tests before them, so a run
// stopped at its deadline prints nothing of the test that hangs. `test:dequeue` ("right
// before it is executed") and `test:complete` come as they happen, so this record names the
// test that was running. Node enqueues every test file (as an entry named after the file)
// when the run starts: that record ({"queued_file": path}) is the run's list of test files,
// which `--mode resume` needs to tell the files that never started. One reporter, not a third beside spec and TAP: node 20 warns about
// a listener leak with three.
import { openSync, writeSync } from 'node:fs'
import { tap } from 'node:test/reporters'

function opened(path) {
  try {
    return path ? openSync(path, 'a') : null
  } catch {
    return null // no record: a stopped run then has only its TAP and text output
  }
}

export default async function* greenloopTap(source) {
  const fd = opened(process.env.GREENLOOP_NODE_STREAM)
  async function* watched() {
    for await (const event of source) {
      const d = event.data
      let item = null
      if (event.type === 'test:enqueue' && d.file && d.name === d.file) {
        item = { queued_file: d.file }
      } else if (event.type === 'test:dequeue') {
        item = { start: d.name, file: d.file ?? null, line: d.line ?? null, nesting: d.nesting }
      } else if (event.type === 'test:complete') {
        item = { end: d.name, file: d.file ?? null, nesting: d.nesting }
      }
      if (item !== null && fd !== null) {
        try {
          writeSync(fd, JSON.stringify(item) + '\n')
        } catch {
          // a full disk never fails the run
        }
      }
      yield event
    }
  }
  yield* tap(watched())
}
