// greenloop's live-progress reporter for node:test (`--test-reporter=<this file>`).
//
// One NDJSON line per finished test, written the moment node reports it, to the
// `--test-reporter-destination` greenloop gives it (the run's progress.ndjson), which
// greenloop tails for live progress. Suites are not tests (their own pass/fail line comes
// after their tests'); a skipped or todo test counts as skipped, also when a todo fails.
export default async function* greenloopProgress(source) {
  for await (const event of source) {
    if (event.type !== 'test:pass' && event.type !== 'test:fail') continue
    const data = event.data || {}
    if (data.details && data.details.type === 'suite') continue
    const skipped = (data.skip !== undefined && data.skip !== false) || (data.todo !== undefined && data.todo !== false)
    const status = skipped ? 'skip' : event.type === 'test:fail' ? 'fail' : 'pass'
    yield JSON.stringify({ status, test: String(data.name), file: data.file || null }) + '\n'
  }
}
