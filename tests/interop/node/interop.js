'use strict';
// ali-ons (a pure-JavaScript RocketMQ 4.x client nobody here wrote) against txmq through its name server.
// Usage: node interop.js NAMESRV_ADDR TOPIC. Prints one JSON line with what was produced and consumed.
const { Producer, Consumer, Message } = require('ali-ons');

const [ nameSrv, topic ] = process.argv.slice(2);
const quiet = { info() {}, warn() {}, debug() {}, error() {} };
const common = { nameSrv, httpclient: {}, logger: quiet };
const deadline = setTimeout(() => finish('timeout'), 60000);
const received = [];
const errors = [];
let retried = false;
let producer;
let consumer;

function summary() {
  return received.map(m => ({ body: m.body.toString(), tags: m.tags, queueId: m.queueId, reconsumeTimes: m.reconsumeTimes }));
}

async function finish(outcome) {
  clearTimeout(deadline);
  console.log(JSON.stringify({ outcome, received: summary(), errors }));
  try { await consumer.close(); } catch (e) { /* closing is best effort */ }
  try { await producer.close(); } catch (e) { /* closing is best effort */ }
  process.exit(outcome === 'ok' ? 0 : 1);
}

async function main() {
  consumer = new Consumer({ ...common, consumerGroup: 'CID_TXMQ_ONS', consumeFromWhere: 'CONSUME_FROM_FIRST_OFFSET', maxReconsumeTimes: 3 });
  consumer.on('error', err => errors.push(String(err && err.message)));
  const expected = 8; // 3 normal + 3 ordered + 1 delayed + the retried one again
  consumer.subscribe(topic, '*', async msg => {
    received.push(msg);
    if (msg.body.toString() === 'retry-me' && !retried) {
      retried = true;
      return Consumer.ACTION_RETRY;
    }
    if (received.length >= expected) setImmediate(() => finish('ok'));
  });
  await consumer.ready();
  producer = new Producer({ ...common, producerGroup: 'PID_TXMQ_ONS' });
  await producer.ready();
  const sent = [];
  for (let i = 0; i < 2; i++) sent.push(await producer.send(new Message(topic, 'TagA', `normal-${i}`)));
  sent.push(await producer.send(new Message(topic, 'TagA', 'retry-me')));
  for (let i = 0; i < 3; i++) {
    const msg = new Message(topic, 'TagO', `ordered-${i}`);
    msg.shardingKey = 'order-1';
    sent.push(await producer.send(msg));
  }
  const delayed = new Message(topic, 'TagD', 'delayed');
  delayed.delayTimeLevel = 2;
  sent.push(await producer.send(delayed));
  if (!sent.every(r => r.sendStatus === 'SEND_OK')) await finish('send failed: ' + JSON.stringify(sent));
}

main().catch(err => { errors.push(String(err && err.stack)); finish('error'); });
