// `npm run --silent admin -- <command>`: the admin API from a shell, printing the same JSON.
// Talks to a running service: API_URL (default http://127.0.0.1:$PORT), with ADMIN_TOKEN or, in
// development, the token `npm start` generated in DATA_DIR/secrets.json.
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';

const USAGE = `usage: npm run --silent admin -- <command>
  workspace create --name N [--credits EUR]
  workspace show --id W
  workspace limits --id W --max-pending-jobs N|default            (jobs the workspace may have pending at once)
  workspace alert --id W --low-balance EUR|off                     (the webhook event balance.low below EUR)
  credits add --workspace W --amount EUR [--idempotency-key K]   (the same K applies once)
  key create --workspace W [--models a,b] [--spend-limit EUR]
  key revoke --id K                                              (the key is refused from then on)
  ledger audit
  job inspect --id JOB_ID`;

function fail(message: string, code = 2): never {
  process.stderr.write(`admin: ${message}\n`);
  process.exit(code);
}

function adminToken(): string {
  if (process.env['ADMIN_TOKEN']) return process.env['ADMIN_TOKEN'];
  const file = path.join(path.resolve(process.env['DATA_DIR'] ?? './.data'), 'secrets.json');
  try {
    const token = JSON.parse(fs.readFileSync(file, 'utf8')).admin_token;
    if (typeof token === 'string' && token) return token;
  } catch {
    // fall through
  }
  return fail(`no ADMIN_TOKEN set and none found in ${file}; run npm start first or set ADMIN_TOKEN`);
}

function euros(flag: string, raw: string | undefined): number {
  const n = Number(raw);
  if (raw === undefined || raw.trim() === '' || !Number.isFinite(n)) fail(`--${flag} must be a number of euros`);
  return n;
}

/** The body of `workspace alert`: the low balance alert in euros, or off. */
function lowBalanceBody(raw: string): { low_balance_threshold_in_euro: number | null } {
  return { low_balance_threshold_in_euro: raw === 'off' ? null : euros('low-balance', raw) };
}

/** The command line: the command's words and its flags. */
function parseCommandLine() {
  return parseArgs({
    args: process.argv.slice(2),
    allowPositionals: true,
    options: {
      name: { type: 'string' },
      credits: { type: 'string' },
      id: { type: 'string' },
      workspace: { type: 'string' },
      amount: { type: 'string' },
      models: { type: 'string' },
      'spend-limit': { type: 'string' },
      'max-pending-jobs': { type: 'string' },
      'low-balance': { type: 'string' },
      'idempotency-key': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
}

type Flags = ReturnType<typeof parseCommandLine>['values'];

/** One call of the admin API. */
interface AdminRequest {
  method: string;
  route: string;
  body: unknown;
  headers: Record<string, string>;
}

/**
 * The admin API call a command stands for. A missing or invalid flag, or an unknown command, ends the
 * process (exit 2) with one line and, where it helps, the usage.
 */
function requestFor(positionals: string[], values: Flags): AdminRequest {
  const need = (flag: keyof typeof values): string => {
    const v = values[flag];
    if (typeof v !== 'string' || v === '') fail(`missing --${flag}\n${USAGE}`);
    return v;
  };
  let method = 'GET';
  let route: string;
  let body: unknown;
  const extraHeaders: Record<string, string> = {};
  switch (positionals.join(' ')) {
    case 'workspace create':
      method = 'POST';
      route = '/admin/v1/workspaces';
      body = { name: need('name'), ...(values.credits !== undefined ? { credits_in_euro: euros('credits', values.credits) } : {}) };
      break;
    case 'workspace show':
      route = `/admin/v1/workspaces/${encodeURIComponent(need('id'))}`;
      break;
    case 'workspace limits': {
      method = 'POST';
      route = `/admin/v1/workspaces/${encodeURIComponent(need('id'))}/limits`;
      const raw = need('max-pending-jobs');
      const n = Number(raw);
      if (raw !== 'default' && !(Number.isInteger(n) && n >= 1))
        fail('--max-pending-jobs must be a whole number of at least 1, or "default"');
      body = { max_pending_jobs: raw === 'default' ? null : n };
      break;
    }
    case 'workspace alert':
      method = 'PATCH';
      route = `/admin/v1/workspaces/${encodeURIComponent(need('id'))}/account`;
      body = lowBalanceBody(need('low-balance'));
      break;
    case 'credits add':
      method = 'POST';
      route = `/admin/v1/workspaces/${encodeURIComponent(need('workspace'))}/credits`;
      body = { amount_in_euro: euros('amount', values.amount) };
      if (values['idempotency-key']) extraHeaders['idempotency-key'] = values['idempotency-key'];
      break;
    case 'key create':
      method = 'POST';
      route = `/admin/v1/workspaces/${encodeURIComponent(need('workspace'))}/api-keys`;
      body = {
        ...(values.models
          ? {
              models: values.models
                .split(',')
                .map((m) => m.trim())
                .filter(Boolean),
            }
          : {}),
        ...(values['spend-limit'] !== undefined ? { spend_limit_in_euro: euros('spend-limit', values['spend-limit']) } : {}),
      };
      break;
    case 'key revoke':
      method = 'DELETE';
      route = `/admin/v1/api-keys/${encodeURIComponent(need('id'))}`;
      break;
    case 'ledger audit':
      route = '/admin/v1/ledger/audit';
      break;
    case 'job inspect':
      route = `/admin/v1/video-jobs/${encodeURIComponent(need('id'))}`;
      break;
    default:
      fail(`unknown command "${positionals.join(' ')}"\n${USAGE}`);
  }
  return { method, route, body, headers: extraHeaders };
}

/**
 * Sends the call with the admin token (the token is looked up only now, after the command was
 * understood) and prints the answer, indented when it is JSON; an error answer exits 1, and so does a
 * service that cannot be reached.
 */
async function send({ method, route, body, headers }: AdminRequest): Promise<void> {
  const base = (process.env['API_URL'] ?? `http://127.0.0.1:${process.env['PORT'] || 8080}`).replace(/\/+$/, '');
  let res: Response;
  try {
    res = await fetch(base + route, {
      method,
      headers: {
        ...headers,
        authorization: `Bearer ${adminToken()}`,
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      signal: AbortSignal.timeout(30_000),
    });
  } catch (err) {
    fail(`cannot reach the service at ${base} (${(err as Error).message}); is npm start running? Set API_URL otherwise`, 1);
  }
  const text = await res.text();
  let out = text;
  try {
    out = JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    // not JSON: print as is
  }
  process.stdout.write(out + '\n');
  if (!res.ok) process.exit(1);
}

async function main(): Promise<void> {
  const { positionals, values } = parseCommandLine();
  if (values.help || positionals.length === 0) {
    process.stdout.write(USAGE + '\n');
    return;
  }
  await send(requestFor(positionals, values));
}

main().catch((err) => fail((err as Error).message, 1));
