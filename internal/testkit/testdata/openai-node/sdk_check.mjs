// The OpenAI Node SDK, unmodified, against videogen: create (multipart, as the SDK sends it), retrieve,
// poll as the server says (openai-poll-after-ms), list with auto-paging, download the MP4, its thumbnail
// and spritesheet, delete, and the refusals a developer meets. Run by TestOpenAINodeSDK with
// VIDEOGEN_BASE_URL and VIDEOGEN_API_KEY; prints one JSON line of what it saw, or fails with a message.
import OpenAI from 'openai';

const client = new OpenAI({
  baseURL: process.env.VIDEOGEN_BASE_URL + '/v1',
  apiKey: process.env.VIDEOGEN_API_KEY,
  maxRetries: 0,
});

function check(ok, what) {
  if (!ok) throw new Error(what);
}

// wait polls a video until it is finished, waiting as long as each answer's openai-poll-after-ms says
// (capped, so a test server's long hint cannot stall the check).
async function wait(id) {
  for (;;) {
    const { data, response } = await client.videos.retrieve(id).withResponse();
    if (data.status === 'completed' || data.status === 'failed') return data;
    const after = Number(response.headers.get('openai-poll-after-ms'));
    check(after > 0, `no openai-poll-after-ms on a ${data.status} video`);
    await new Promise((r) => setTimeout(r, Math.min(after, 500)));
  }
}

const first = await client.videos.create({ model: 'videogen-2.0-720p', prompt: 'a lighthouse at dusk', seconds: '8', size: '1280x720' });
check(first.id.startsWith('video_') && first.status === 'queued' && first.seconds === '8' && first.size === '1280x720',
  `created ${JSON.stringify(first)}`);
const got = await client.videos.retrieve(first.id);
check(got.id === first.id && got.object === 'video', `retrieved ${JSON.stringify(got)}`);
const second = await client.videos.create({ model: 'videogen-2.0-720p', prompt: 'a second lighthouse', seconds: '4', size: '720x1280' });

const done = await wait(second.id);
check(done.status === 'completed' && done.progress === 100, `finished ${JSON.stringify(done)}`);
check((await wait(first.id)).status === 'completed', 'the first video did not complete');

const listed = [];
for await (const video of client.videos.list({ limit: 1 })) listed.push(video.id);
check(listed.length === 2 && listed.includes(first.id) && listed.includes(second.id), `listed ${listed}`);

const content = await client.videos.downloadContent(second.id);
const mp4 = Buffer.from(await content.arrayBuffer());
check(content.headers.get('content-type') === 'video/mp4' && mp4.subarray(4, 8).toString() === 'ftyp', `content ${content.headers.get('content-type')}`);
const stills = {};
for (const variant of ['thumbnail', 'spritesheet']) {
  const res = await client.videos.downloadContent(second.id, { variant });
  const body = Buffer.from(await res.arrayBuffer());
  check(res.headers.get('content-type') === 'image/jpeg' && body[0] === 0xff && body[1] === 0xd8, `${variant}: ${res.headers.get('content-type')}`);
  stills[variant] = body.length;
}

const deleted = await client.videos.delete(second.id);
check(deleted.id === second.id && deleted.object === 'video.deleted' && deleted.deleted === true, `deleted ${JSON.stringify(deleted)}`);

// Refusals arrive as the SDK's typed errors, with our code.
async function refusal(call) {
  try {
    await call();
  } catch (err) {
    check(err instanceof OpenAI.APIError, `not an APIError: ${err}`);
    return { status: err.status, code: err.code };
  }
  throw new Error('the call was not refused');
}
const afterDelete = await refusal(() => client.videos.retrieve(second.id));
// A remix of a deleted video is 404, as for any unknown id (remix itself: TestOpenAIGoSDKRemix).
const remix = await refusal(() => client.videos.remix(second.id, { prompt: 'again' }));
const badVariant = await refusal(() => client.videos.downloadContent(first.id, { variant: 'poster' }));

console.log(JSON.stringify({ first: first.id, second: second.id, listed, mp4: mp4.length, stills, afterDelete, remix, badVariant }));
