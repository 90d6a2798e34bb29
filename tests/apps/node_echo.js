// A Node.js `net` echo server and client (libuv, epoll), for
// tests/apps/node_device.sh.
//
// server HOST: listens on an ephemeral TCP port, prints "READY <port>",
//   echoes until SIGTERM, then closes and exits 0.
// client HOST PORT COUNT CONNECTIONS: sends COUNT messages of 1 B-20 KiB
//   spread over CONNECTIONS concurrent connections, one at a time on each
//   (the next goes once the echo of the last is back), compares every echo
//   byte for byte, and prints the messages and bytes echoed and the time it
//   took. Exit status 0 only when every echo matched; a 120 s timer bounds
//   the run.
'use strict';
const net = require('net');

function serve(host) {
  const sockets = new Set();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('data', (data) => socket.write(data));
    socket.on('end', () => socket.end());
    socket.on('error', () => {});
    socket.on('close', () => sockets.delete(socket));
  });
  server.listen(0, host, () => console.log(`READY ${server.address().port}`));
  // `timeout` passes SIGTERM on twice (to the child, then its process group):
  // the handler stays installed so the second one is harmless.
  process.on('SIGTERM', () => {
    server.close();
    for (const socket of sockets) socket.destroy();
  });
}

// The same size pattern as asyncio_echo.py: some echoes take several reads.
function message(connection, index) {
  const size = 1 + ((index * 7919 + connection * 104729) % 20000);
  return Buffer.alloc(size, `${connection}:${index}:`);
}

// Runs COUNT round trips on one connection; resolves with the bytes echoed.
function runConnection(host, port, connection, count) {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host, port }, () => {
      socket.setNoDelay(true);
      next();
    });
    let index = 0;
    let sent = null;
    let received = [];
    let receivedLength = 0;
    let echoed = 0;
    function next() {
      if (index === count) {
        socket.end();
        resolve(echoed);
        return;
      }
      sent = message(connection, index);
      received = [];
      receivedLength = 0;
      socket.write(sent);
    }
    socket.on('data', (data) => {
      received.push(data);
      receivedLength += data.length;
      if (sent === null || receivedLength > sent.length) {
        reject(new Error(`connection ${connection}: ${receivedLength} bytes echoed for a message of ${sent ? sent.length : 0}`));
        socket.destroy();
        return;
      }
      if (receivedLength < sent.length) return;
      if (!Buffer.concat(received).equals(sent)) {
        reject(new Error(`connection ${connection} message ${index}: echo differs`));
        socket.destroy();
        return;
      }
      echoed += sent.length;
      index += 1;
      next();
    });
    socket.on('error', reject);
    socket.on('close', () => {
      if (index !== count) reject(new Error(`connection ${connection}: closed after ${index}/${count} messages`));
    });
  });
}

async function client(host, port, count, connections) {
  const timer = setTimeout(() => {
    console.error('client: no result within 120 s');
    process.exit(1);
  }, 120000);
  const start = process.hrtime.bigint();
  const runs = [];
  for (let i = 0; i < connections; i++) {
    const share = Math.floor(count / connections) + (i < count % connections ? 1 : 0);
    runs.push(runConnection(host, port, i, share));
  }
  const bytes = (await Promise.all(runs)).reduce((a, b) => a + b, 0);
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  clearTimeout(timer);
  console.log(`tcp messages echoed: ${count}/${count} over ${connections} connections`);
  console.log(`tcp bytes echoed: ${bytes} in ${seconds.toFixed(3)} s`);
}

const [mode, ...args] = process.argv.slice(2);
if (mode === 'server' && args.length === 1) {
  serve(args[0]);
} else if (mode === 'client' && args.length === 4) {
  client(args[0], Number(args[1]), Number(args[2]), Number(args[3])).catch((error) => {
    console.error(`client: ${error.message}`);
    process.exit(1);
  });
} else {
  console.error('usage: node_echo.js server HOST | client HOST PORT COUNT CONNECTIONS');
  process.exit(2);
}
