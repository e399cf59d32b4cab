// greenloop's live-progress reporter for node:test (`--test-reporter=<this file>`).
//
// One NDJSON line per finished test, written the moment node reports it, to the
// `--test-reporter-destination` greenloop gives it (the run's progress.ndjson), which
// greenloop tails for live progress. Suites are not tests (their own pass/fail line comes
// after their tests'); a skipped or todo test counts as skipped, also when a todo fails.
//
// `test` is the name as greenloop's node:test parser gives it (its describes joined by " > "),
// kept from the `test:start` events, which come in order per file; a failing test's line
// carries its error's message. `--mode resume` reads these lines to keep the tests of the
// files that finished before greenloop stopped.
function errorOf(data) {
  const error = data.details && data.details.error
  if (!error) return undefined
  const cause = error.cause !== undefined ? error.cause : error
  const text = cause && cause.message !== undefined ? cause.message : cause
  return { message: String(text ?? '').slice(0, 4000), stack: String((cause && cause.stack) || '').slice(0, 4000) }
}

export default async function* greenloopProgress(source) {
  const stacks = new Map() // test file -> names of the open describes and tests, by nesting
  for await (const event of source) {
    const data = event.data || {}
    if (event.type === 'test:start' && data.name !== data.file) {
      const stack = stacks.get(data.file) || []
      stack.length = Math.min(stack.length, data.nesting || 0)
      stack.push(String(data.name))
      stacks.set(data.file, stack)
      continue
    }
    if (event.type !== 'test:pass' && event.type !== 'test:fail') continue
    if (data.details && data.details.type === 'suite') continue
    const skipped = (data.skip !== undefined && data.skip !== false) || (data.todo !== undefined && data.todo !== false)
    const status = skipped ? 'skip' : event.type === 'test:fail' ? 'fail' : 'pass'
    const parents = (stacks.get(data.file) || []).slice(0, data.nesting || 0)
    const name = data.name === data.file ? String(data.name) : [...parents, String(data.name)].join(' > ')
    const record = { status, test: name, file: data.file || null }
    if (status === 'fail') Object.assign(record, errorOf(data))
    yield JSON.stringify(record) + '\n'
  }
}
