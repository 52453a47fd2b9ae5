// The floor of speech (phase 8): a relay and nothing else, in a process of its own as the product's API
// is. It asks the provider what the product asks and hands on what comes back, with the same libraries
// (Node's fetch for HTTP, `ws` for WebSockets) and the product's HTTP server settings, but without
// authentication, holds, settlement, encoding, limits or logs:
//
//   POST /floor/speech {"voice", "input"}  ElevenLabs' POST /v1/text-to-speech/{voice}/stream (pcm_22050),
//                                          its body piped to the client as it comes.
//   GET  /floor/speech/stream              a WebSocket taking the product's context messages
//                                          ({"context_id", "voice", "text"}) and answering "audio" and
//                                          "done" messages as the product does: an ElevenLabs voice opens a
//                                          stream-input connection per context, a Cartesia voice speaks
//                                          on one connection per client socket to Cartesia's WebSocket. The
//                                          provider's base64 audio is passed on as it is.
//   GET  /floor/speech/ping                204: a round trip to another process on this machine, the
//                                          cost of each hop a relay adds.
//
// What the product adds to a speaker's first byte beyond this floor is its own work; what the floor adds
// beyond a client talking to the provider straight is a second process relaying on the same cores.
import { Readable } from 'node:stream';
import express from 'express';
import WebSocket, { WebSocketServer } from 'ws';
import { CARTESIA_DEFAULT_VERSION, CARTESIA_PRESET_VOICES } from '../src/providers/voice/cartesia.js';
import { CARTESIA_SAMPLE_RATE_HZ } from '../src/providers/voice/cartesia-wire.js';
import { listen } from './listen.js';
import type { RunningSubject } from './subject.js';

export const SPEECH_FLOOR_PATH = '/floor/speech';
const ELEVENLABS_MODEL = 'eleven_multilingual_v2';

interface ContextMessage {
  context_id: string;
  voice: string;
  text: string;
}

export async function startSpeechRelayFloor(env: NodeJS.ProcessEnv): Promise<RunningSubject> {
  const elevenlabs = { url: env['ELEVENLABS_BASE_URL']!, key: env['ELEVENLABS_API_KEY']! };
  const cartesia = { url: env['CARTESIA_BASE_URL']!, key: env['CARTESIA_API_KEY']! };
  const app = express();
  app.disable('x-powered-by');
  app.get(`${SPEECH_FLOOR_PATH}/ping`, (_req, res) => void res.status(204).end());
  app.post(SPEECH_FLOOR_PATH, express.json(), async (req, res) => {
    const { voice, input } = req.body as { voice: string; input: string };
    const upstream = await fetch(`${elevenlabs.url}/v1/text-to-speech/${encodeURIComponent(voice)}/stream?output_format=pcm_22050`, {
      method: 'POST',
      headers: { 'xi-api-key': elevenlabs.key, 'content-type': 'application/json' },
      body: JSON.stringify({ text: input, model_id: ELEVENLABS_MODEL }),
    }).catch(() => null);
    if (!upstream?.ok || !upstream.body) {
      res.status(502).end();
      return;
    }
    res.status(200).set('content-type', 'audio/pcm');
    Readable.fromWeb(upstream.body as import('node:stream/web').ReadableStream).pipe(res);
  });
  const server = await listen(app);
  const wss = new WebSocketServer({ server: server.server, path: `${SPEECH_FLOOR_PATH}/stream`, perMessageDeflate: false });
  wss.on('connection', (client) => {
    const send = (m: unknown) => client.readyState === WebSocket.OPEN && client.send(JSON.stringify(m));
    let toCartesia: WebSocket | null = null;
    const cartesiaSocket = () => {
      if (toCartesia) return toCartesia;
      const ws = new WebSocket(`${cartesia.url.replace(/^http/, 'ws')}/tts/websocket`, {
        headers: { authorization: `Bearer ${cartesia.key}`, 'cartesia-version': CARTESIA_DEFAULT_VERSION },
        perMessageDeflate: false,
      });
      ws.on('message', (data) => {
        const m = JSON.parse(data.toString()) as { type: string; context_id: string; data?: string };
        if (m.type === 'chunk') send({ type: 'audio', context_id: m.context_id, audio: m.data });
        else if (m.type === 'done' || m.type === 'error') send({ type: m.type, context_id: m.context_id });
      });
      ws.on('error', () => {});
      toCartesia = ws;
      return ws;
    };
    const whenOpen = (ws: WebSocket, then: () => void) => (ws.readyState === WebSocket.OPEN ? then() : ws.once('open', then));
    client.on('message', (data) => {
      const m = JSON.parse(data.toString()) as ContextMessage;
      if ((CARTESIA_PRESET_VOICES as readonly string[]).includes(m.voice)) {
        const ws = cartesiaSocket();
        whenOpen(ws, () =>
          ws.send(
            JSON.stringify({
              context_id: m.context_id,
              model_id: 'sonic-3',
              voice: { mode: 'id', id: m.voice },
              output_format: { container: 'raw', encoding: 'pcm_s16le', sample_rate: CARTESIA_SAMPLE_RATE_HZ },
              language: 'en',
              add_timestamps: true,
              transcript: m.text,
              continue: false,
            }),
          ),
        );
        return;
      }
      const query = `model_id=${ELEVENLABS_MODEL}&output_format=pcm_22050&sync_alignment=true`;
      const ws = new WebSocket(
        `${elevenlabs.url.replace(/^http/, 'ws')}/v1/text-to-speech/${encodeURIComponent(m.voice)}/stream-input?${query}`,
        { headers: { 'xi-api-key': elevenlabs.key }, perMessageDeflate: false },
      );
      ws.on('open', () => {
        for (const text of [' ', m.text, '']) ws.send(JSON.stringify({ text }));
      });
      ws.on('message', (data) => {
        const a = JSON.parse(data.toString()) as { audio?: string; isFinal?: boolean };
        if (a.audio) send({ type: 'audio', context_id: m.context_id, audio: a.audio });
        if (a.isFinal) {
          send({ type: 'done', context_id: m.context_id });
          ws.close();
        }
      });
      ws.on('error', () => send({ type: 'error', context_id: m.context_id }));
    });
    client.on('close', () => toCartesia?.close());
  });
  return {
    url: server.url,
    async stop() {
      for (const c of wss.clients) c.terminate();
      wss.close();
      await server.close();
    },
  };
}
