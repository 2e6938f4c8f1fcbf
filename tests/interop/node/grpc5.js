'use strict';
// rocketmq-client-nodejs 1.0.8 (the official RocketMQ 5 Node client, unmodified) against txmq's gRPC port.
// Usage: node grpc5.js ENDPOINT TOPIC GROUP SSL(0|1) TX(0|1). Prints one JSON line with what was sent,
// received and checked. With SSL=1 the broker's self-signed certificate must be trusted through the
// environment (GRPC_DEFAULT_SSL_ROOTS_FILE_PATH), the way an application would configure grpc-js.
const { Producer, SimpleConsumer } = require('rocketmq-client-nodejs');
// TransactionResolution is not re-exported by the package index; it lives with the generated protobuf code.
const { TransactionResolution } = require('rocketmq-client-nodejs/proto/apache/rocketmq/v2/definition_pb');

const [ endpoints, topic, consumerGroup, ssl, tx ] = process.argv.slice(2);
const sslEnabled = ssl === '1';
const errors = [];
// One logger per client: clients sharing the default logger throw 'log stream had been closed' on shutdown.
function logger(name) {
  const note = level => (...args) => { if (level === 'error') errors.push(`${name}: ${args.map(String).join(' ')}`); };
  return { info: note('info'), warn: note('warn'), error: note('error'), debug: note('debug'), close() {} };
}
const checked = [];
const checker = {
  async check(view) {
    checked.push(view.messageId);
    return TransactionResolution.COMMIT;
  },
};
let producer;
let consumer;
const deadline = setTimeout(() => finish('timeout', {}), 25000);

async function finish(outcome, extra) {
  clearTimeout(deadline);
  console.log(JSON.stringify({ outcome, errors, checked, ...extra }));
  try { if (consumer) await consumer.shutdown(); } catch (e) { /* closing is best effort */ }
  try { if (producer) await producer.shutdown(); } catch (e) { /* closing is best effort */ }
  process.exit(outcome === 'ok' ? 0 : 1);
}

async function main() {
  producer = new Producer({ endpoints, sslEnabled, topics: [ topic ], checker, logger: logger('producer') });
  await producer.startup();
  const sent = [];
  for (let i = 0; i < 3; i++) {
    const message = { topic, tag: `Tag${i}`, keys: [ `key-${i}`, 'shared' ], body: Buffer.from(`node-${i}`) };
    const receipt = await producer.send(message);
    sent.push({ body: `node-${i}`, tag: `Tag${i}`, keys: message.keys, messageId: receipt.messageId });
  }
  let orphanId = null;
  if (tx === '1') {
    const committed = producer.beginTransaction();
    const receipt = await producer.send({ topic, tag: 'TagTx', keys: [ 'tx' ], body: Buffer.from('tx-committed') }, committed);
    await committed.commit();
    sent.push({ body: 'tx-committed', tag: 'TagTx', keys: [ 'tx' ], messageId: receipt.messageId });
    const orphan = producer.beginTransaction(); // never decided here: the broker asks the checker
    const orphanReceipt = await producer.send({ topic, tag: 'TagTx', keys: [ 'orphan' ], body: Buffer.from('tx-checked') }, orphan);
    orphanId = orphanReceipt.messageId;
    sent.push({ body: 'tx-checked', tag: 'TagTx', keys: [ 'orphan' ], messageId: orphanId });
  }
  consumer = new SimpleConsumer({
    endpoints, sslEnabled, consumerGroup, awaitDuration: 2000,
    subscriptions: new Map().set(topic, '*'), logger: logger('consumer'),
  });
  await consumer.startup();
  const received = [];
  while (received.length < sent.length) {
    const views = await consumer.receive(16, 10000);
    for (const view of views) {
      received.push({ body: view.body.toString(), tag: view.tag, keys: view.keys, messageId: view.messageId });
      await consumer.ack(view);
    }
  }
  await finish('ok', { sent, received, orphanId });
}

main().catch(err => { errors.push(String(err && err.stack || err)); finish('error', {}); });
