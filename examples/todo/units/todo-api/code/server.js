'use strict';
// Starts the todo-api unit on HOST:PORT, calling the auth unit at AUTH_URL.
const { createApp, openDb } = require('./app');

const host = process.env.HOST || '127.0.0.1';
const port = Number(process.env.PORT || 8082);
const authUrl = process.env.AUTH_URL;
if (!authUrl) {
  console.error('AUTH_URL is not set: todo-api needs the auth unit (units.json depends_on: ["auth"])');
  process.exit(2);
}
const db = openDb(process.env.TODO_DB || ':memory:');
const server = createApp({ authUrl, db }).listen(port, host, () => {
  console.log(`todo-api listening on http://${host}:${server.address().port} (auth at ${authUrl})`);
});
server.on('error', (err) => {
  console.error(`todo-api cannot listen on ${host}:${port}: ${err.code || err.message}`);
  process.exit(1);
});
process.on('SIGTERM', () => {
  server.close(() => {
    db.close();
    console.log('todo-api stopped');
    process.exit(0);
  });
  server.closeAllConnections();
});
