// Baseline (a) for bench/ingress/run.ts: the least a Node HTTP server can do per webhook,
// read the whole body and answer 202, so the ratio shows what verification, parsing and the
// broker's ack cost on top.
import http from 'node:http';

const port = Number(process.env.PORT ?? 0);
const server = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    Buffer.concat(chunks);
    res.writeHead(202, { 'content-type': 'application/json' }).end('{"status":"accepted"}');
  });
});
server.keepAliveTimeout = 5000;
server.listen(port, '127.0.0.1', () => {
  const address = server.address() as { port: number };
  console.log(JSON.stringify({ msg: 'ingress listening', port: address.port }));
});
process.once('SIGTERM', () => server.close(() => process.exit(0)));
