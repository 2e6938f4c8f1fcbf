'use strict';
// ali-ons deflates a body over 4 KiB (compressMsgBodyOverHowmuch) and flags it COMPRESSED in sysFlag.
// Usage: node compressed.js NAMESRV_ADDR TOPIC. Sends one such body and consumes it back; prints one
// JSON line: the body sent and every body received.
const { Producer, Consumer, Message } = require('ali-ons');

const [ nameSrv, topic ] = process.argv.slice(2);
const quiet = { info() {}, warn() {}, debug() {}, error() {} };
const common = { nameSrv, httpclient: {}, logger: quiet };
const body = Array.from({ length: 1000 }, (_, i) => `line-${i};`).join('');
const received = [];
let producer;
let consumer;
const deadline = setTimeout(() => finish('timeout'), 60000);

async function finish(outcome) {
  clearTimeout(deadline);
  console.log(JSON.stringify({ outcome, sent: body, received }));
  try { await consumer.close(); } catch (e) { /* best effort */ }
  try { await producer.close(); } catch (e) { /* best effort */ }
  process.exit(0);
}

async function main() {
  consumer = new Consumer({ ...common, consumerGroup: 'CID_TXMQ_DEFLATE', consumeFromWhere: 'CONSUME_FROM_FIRST_OFFSET' });
  consumer.subscribe(topic, '*', async msg => {
    received.push(msg.body.toString());
    setImmediate(() => finish('ok'));
  });
  await consumer.ready();
  producer = new Producer({ ...common, producerGroup: 'PID_TXMQ_DEFLATE' });
  await producer.ready();
  const result = await producer.send(new Message(topic, 'TagZ', body));
  if (result.sendStatus !== 'SEND_OK') await finish('send failed: ' + JSON.stringify(result));
}

main().catch(err => { received.push(String(err && err.stack)); finish('error'); });
