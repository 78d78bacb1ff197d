// The OpenAI Node SDK's client.webhooks.unwrap, unmodified, on videogen's webhook deliveries. Run by
// TestWebhooksVerifiedByOpenAINode with the deliveries on stdin as JSON {secret, deliveries: [{body,
// headers}]}; prints one JSON line (the events it unwrapped), or fails with a message.
import OpenAI from 'openai';

const input = JSON.parse(await new Promise((resolve) => {
  let data = '';
  process.stdin.on('data', (c) => (data += c));
  process.stdin.on('end', () => resolve(data));
}));

const client = new OpenAI({ apiKey: 'unused', webhookSecret: input.secret });
const wrong = new OpenAI({ apiKey: 'unused', webhookSecret: 'whsec_' + Buffer.alloc(32, 7).toString('base64') });

async function refused(what, fn) {
  try {
    await fn();
  } catch {
    return;
  }
  throw new Error(`${what} was accepted`);
}

const events = [];
for (const d of input.deliveries) {
  const event = await client.webhooks.unwrap(d.body, d.headers);
  events.push({ id: event.id, type: event.type, object: event.object, video: event.data.id, webhookId: d.headers['webhook-id'] });
  await refused('a tampered body', () => client.webhooks.unwrap(d.body.replace('"event"', '"event" '), d.headers));
  await refused('a wrong secret', () => wrong.webhooks.unwrap(d.body, d.headers));
  // Six minutes later, the same delivery is too old (the SDK's tolerance is 5 minutes).
  const realNow = Date.now;
  Date.now = () => realNow() + 6 * 60 * 1000;
  try {
    await refused('a delivery 6 minutes old', () => client.webhooks.unwrap(d.body, d.headers));
  } finally {
    Date.now = realNow;
  }
}
console.log(JSON.stringify({ events }));
