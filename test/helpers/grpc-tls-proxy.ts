// A TLS front for the Temporal dev server (which serves plaintext only), standing where a secured
// Temporal (a cluster with mTLS, Temporal Cloud with API keys) stands: it terminates TLS with a server
// certificate, may require a client certificate signed by its CA (mTLS) and may require
// `authorization: Bearer <key>` gRPC metadata from a set of keys it accepts (refused with gRPC status
// UNAUTHENTICATED, as Temporal's authorizer does), may refuse the operator service (PERMISSION_DENIED, as
// Temporal Cloud does to an identity without that permission), and forwards every gRPC call to the dev
// server over HTTP/2. It records the client certificates and keys it saw, for tests of rotation.
import http2 from 'node:http2';
import type tls from 'node:tls';

export interface GrpcTlsProxy {
  address: string;
  /** Keys accepted now (empty set: no key required). */
  apiKeys: Set<string>;
  /** Common names of client certificates accepted now (null: any certificate the CA signed). */
  clientNames: Set<string> | null;
  /** Client certificate common names seen on accepted calls, in order of first use. */
  seenClientNames: string[];
  /** Calls refused (a bad key, a certificate no longer accepted, the operator service when denied). */
  refused: number;
  /** false: the operator service is refused with PERMISSION_DENIED, as for a Temporal Cloud identity. */
  operatorService: boolean;
  /** Ends every open HTTP/2 session (clients reconnect, with a new handshake). */
  dropSessions(): void;
  close(): Promise<void>;
}

export async function startGrpcTlsProxy(opts: {
  upstream: string;
  cert: string;
  key: string;
  /** Client certificates must be signed by this CA (mTLS); unset: no client certificate asked. */
  clientCa?: string;
  apiKeys?: string[];
}): Promise<GrpcTlsProxy> {
  const upstream = http2.connect(`http://${opts.upstream}`);
  upstream.on('error', () => {});
  const sessions = new Set<http2.ServerHttp2Session>();
  const server = http2.createSecureServer({
    cert: opts.cert,
    key: opts.key,
    ...(opts.clientCa ? { ca: opts.clientCa, requestCert: true, rejectUnauthorized: true } : {}),
    allowHTTP1: false,
  });
  const state: GrpcTlsProxy = {
    address: '',
    apiKeys: new Set(opts.apiKeys ?? []),
    clientNames: null,
    seenClientNames: [],
    refused: 0,
    operatorService: true,
    dropSessions: () => {
      for (const s of sessions) s.destroy();
      sessions.clear();
    },
    close: async () => {
      state.dropSessions();
      upstream.close();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
  const refuse = (stream: http2.ServerHttp2Stream, code: number, message: string) => {
    state.refused++;
    stream.respond(
      { ':status': 200, 'content-type': 'application/grpc', 'grpc-status': String(code), 'grpc-message': encodeURIComponent(message) },
      { endStream: true },
    );
  };
  server.on('session', (s) => {
    sessions.add(s);
    s.on('close', () => sessions.delete(s));
    s.on('error', () => {});
  });
  server.on('stream', (stream, headers) => {
    stream.on('error', () => {});
    const socket = stream.session?.socket as tls.TLSSocket | undefined;
    if (opts.clientCa) {
      const cn = socket?.getPeerCertificate()?.subject?.CN;
      const name = Array.isArray(cn) ? cn[0] : cn;
      if (!name || (state.clientNames && !state.clientNames.has(name)))
        return refuse(stream, 16, `client certificate "${name}" is not accepted`);
      if (!state.seenClientNames.includes(name)) state.seenClientNames.push(name);
    }
    if (state.apiKeys.size > 0) {
      const auth = headers['authorization'];
      const key = typeof auth === 'string' && auth.startsWith('Bearer ') ? auth.slice(7) : null;
      if (!key || !state.apiKeys.has(key)) return refuse(stream, 16, 'invalid API key');
    }
    if (!state.operatorService && String(headers[':path']).startsWith('/temporal.api.operatorservice.'))
      return refuse(stream, 7, 'Request unauthorized.');
    const forward: http2.OutgoingHttpHeaders = {};
    for (const [k, v] of Object.entries(headers)) if (!k.startsWith(':') || k === ':path' || k === ':method') forward[k] = v;
    delete forward['authorization'];
    const up = upstream.request(forward);
    up.on('error', () => stream.close(http2.constants.NGHTTP2_CANCEL));
    stream.on('close', () => {
      if (!up.closed) up.close(http2.constants.NGHTTP2_CANCEL);
    });
    up.on('response', (resHeaders, flags) => {
      const out: http2.OutgoingHttpHeaders = {};
      for (const [k, v] of Object.entries(resHeaders)) if (!k.startsWith(':') || k === ':status') out[k] = v;
      // A trailers-only response (an error) ends the stream with its headers.
      if (flags & http2.constants.NGHTTP2_FLAG_END_STREAM) {
        stream.respond(out, { endStream: true });
        return;
      }
      stream.respond(out, { waitForTrailers: true });
      let trailers: http2.OutgoingHttpHeaders = {};
      up.on('trailers', (t) => {
        trailers = {};
        for (const [k, v] of Object.entries(t)) if (!k.startsWith(':')) trailers[k] = v as string | string[];
      });
      stream.on('wantTrailers', () => stream.sendTrailers(trailers));
      up.pipe(stream);
    });
    stream.pipe(up);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as { port: number }).port;
  // A host name, as a real deployment has (its certificate names localhost).
  state.address = `localhost:${port}`;
  return state;
}
