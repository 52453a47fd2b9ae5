// The Helm chart (deploy/helm/video-voice-api), without a cluster or a network: `helm lint` and
// `helm template` over every values file in its ci/ folder, each rendered object decoded strictly into
// its Kubernetes API type by deploy/validate (an unknown field, a field twice or a wrong type fails;
// KEDA's ScaledObject and TriggerAuthentication against their documented fields); what the objects
// say (probes, security context, secrets by reference, Temporal's client variables, the migration
// hook, KEDA); that a broken value fails; and the commands of docs/kubernetes.md, run as written.
import { before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import YAML from 'yaml';
import { goToolsMissing, runTool, toolPath } from '../helpers/tools.js';
import { createTestDatabase } from '../helpers/stack.js';
import { parseCatalog } from '../../src/models/catalog-file.js';

const CHART = 'deploy/helm/video-voice-api';
const VALUES = fs
  .readdirSync(path.join(CHART, 'ci'))
  .filter((f) => f.endsWith('-values.yaml'))
  .sort();

/** Without helm and deploy/validate (and no Go to build them) the chart's tests skip, saying why. */
const TOOLS_MISSING = goToolsMissing(['HELM_PATH', 'K8S_VALIDATE_PATH'], 'helm and deploy/validate');
let helm: string;
let validate: string;
before(() => {
  if (TOOLS_MISSING) return;
  helm = toolPath('HELM_PATH', 'scripts/install-helm.sh');
  validate = toolPath('K8S_VALIDATE_PATH', 'scripts/install-k8s-validate.sh');
});

function render(valuesFile: string, extra: string[] = []): { status: number; output: string; stdout: string } {
  return runTool(helm, ['template', 'video', CHART, '--namespace', 'video', '-f', path.join(CHART, 'ci', valuesFile), ...extra]);
}

type K8sObject = { apiVersion: string; kind: string; metadata: { name: string; annotations?: Record<string, string> }; spec: any };
const objects = (rendered: string): K8sObject[] =>
  YAML.parseAllDocuments(rendered)
    .map((d) => d.toJS() as K8sObject)
    .filter(Boolean);
const find = (objs: K8sObject[], kind: string, name: string) => {
  const o = objs.find((x) => x.kind === kind && x.metadata.name === name);
  assert.ok(o, `${kind}/${name} in ${objs.map((x) => `${x.kind}/${x.metadata.name}`).join(', ')}`);
  return o;
};
const container = (o: K8sObject) => o.spec.template.spec.containers[0];
const envOf = (o: K8sObject): Record<string, any> => Object.fromEntries(container(o).env.map((e: any) => [e.name, e.value ?? e.valueFrom]));

describe('helm lint', { skip: TOOLS_MISSING }, () => {
  for (const file of VALUES) {
    test(`passes --strict with ci/${file}`, () => {
      const r = runTool(helm, ['lint', '--strict', CHART, '-f', path.join(CHART, 'ci', file)]);
      assert.equal(r.status, 0, r.output);
      assert.match(r.output, /1 chart\(s\) linted, 0 chart\(s\) failed/);
    });
  }

  test('without the required values, rendering fails naming the first (lint only reports them)', () => {
    const lint = runTool(helm, ['lint', CHART]);
    assert.match(lint.output, /Missing required value: secrets\.existingSecret is required/);
    const r = runTool(helm, ['template', 'video', CHART]);
    assert.notEqual(r.status, 0);
    assert.match(r.output, /secrets\.existingSecret is required/);
    const noAddress = runTool(helm, [
      'template',
      'video',
      CHART,
      '-f',
      path.join(CHART, 'ci', 'minimal-values.yaml'),
      '--set',
      'temporal.address=',
    ]);
    assert.notEqual(noAddress.status, 0);
    assert.match(noAddress.output, /temporal\.address is required/);
  });
});

describe('helm template: every object valid against the Kubernetes API types', { skip: TOOLS_MISSING }, () => {
  for (const file of VALUES) {
    test(`ci/${file}`, () => {
      const r = render(file);
      assert.equal(r.status, 0, r.output);
      const v = runTool(validate, [], { input: r.stdout });
      assert.equal(v.status, 0, v.output);
      assert.match(v.output, new RegExp(`validate: ${objects(r.stdout).length} objects valid`));
    });
  }
});

describe('what the rendered objects say', { skip: TOOLS_MISSING }, () => {
  test('minimal: API and worker from one image, probes, resources, non-root read-only, PDBs, HPA, migration hook', () => {
    const objs = objects(render('minimal-values.yaml').stdout);
    const api = find(objs, 'Deployment', 'video-video-voice-api-api');
    const worker = find(objs, 'Deployment', 'video-video-voice-api-worker');
    assert.equal(container(api).image, container(worker).image);
    assert.deepEqual(container(api).command, ['node', 'dist/src/api-main.js']);
    assert.deepEqual(container(worker).command, ['node', 'dist/src/worker-main.js']);
    assert.ok(!Object.keys(envOf(api)).some((name) => name.startsWith('OTEL_')), 'without tracing.otlpEndpoint nothing is traced');
    for (const d of [api, worker]) {
      const c = container(d);
      assert.equal(c.livenessProbe.httpGet.path, '/livez');
      assert.equal(c.readinessProbe.httpGet.path, '/readyz');
      assert.ok(c.resources.requests.cpu && c.resources.limits.memory);
      assert.equal(c.securityContext.readOnlyRootFilesystem, true);
      assert.equal(c.securityContext.allowPrivilegeEscalation, false);
      assert.deepEqual(c.securityContext.capabilities.drop, ['ALL']);
      assert.equal(d.spec.template.spec.securityContext.runAsNonRoot, true);
      assert.ok(d.spec.template.spec.volumes.some((v: any) => v.name === 'tmp' && v.emptyDir));
      assert.ok(c.volumeMounts.some((m: any) => m.mountPath === '/tmp'));
      const env = envOf(d);
      // Secrets by reference only: never a value in the rendered objects.
      assert.deepEqual(env['DATABASE_URL'], { secretKeyRef: { name: 'video-voice-api', key: 'DATABASE_URL' } });
      assert.equal(env['TEMPORAL_ADDRESS'], 'temporal-frontend.temporal.svc.cluster.local:7233');
      assert.equal(env['TEMPORAL_NAMESPACE'], 'default');
      assert.equal(env['TEMPORAL_TLS'], undefined);
      assert.equal(env['HOST'], '0.0.0.0');
      assert.equal(env['STORAGE_BACKEND'], 's3');
    }
    // Each process gets only the secrets it uses: a worker never ADMIN_TOKEN, and with S3 (presigned URLs) no URL_SIGNING_SECRET.
    for (const name of ['ADMIN_TOKEN', 'URL_SIGNING_SECRET'])
      assert.deepEqual(envOf(api)[name], { secretKeyRef: { name: 'video-voice-api', key: name } });
    assert.equal(envOf(worker)['ADMIN_TOKEN'], undefined);
    assert.equal(envOf(worker)['URL_SIGNING_SECRET'], undefined);
    assert.equal(envOf(worker)['APP_METRICS_PORT'], '9465');
    assert.equal(container(worker).readinessProbe.httpGet.port, 'app-metrics');
    assert.equal(api.spec.replicas, undefined, 'the HPA owns the API replica count');
    assert.equal(find(objs, 'HorizontalPodAutoscaler', 'video-video-voice-api-api').spec.scaleTargetRef.name, api.metadata.name);
    for (const c of ['api', 'worker']) assert.equal(find(objs, 'PodDisruptionBudget', `video-video-voice-api-${c}`).spec.minAvailable, 1);
    const job = objs.find((o) => o.kind === 'Job')!;
    assert.equal(job.metadata.annotations!['helm.sh/hook'], 'pre-install,pre-upgrade');
    assert.deepEqual(container(job).command, ['node', 'dist/src/migrate-main.js']);
    assert.deepEqual(Object.keys(envOf(job)).sort(), ['DATABASE_URL', 'NODE_ENV']);
    const audit = find(objs, 'CronJob', 'video-video-voice-api-ledger-audit').spec.jobTemplate.spec.template.spec.containers[0];
    assert.deepEqual(audit.command, ['node', 'dist/src/admin-cli.js', 'ledger', 'audit']);
    assert.deepEqual(Object.fromEntries(audit.env.map((e: any) => [e.name, e.value ?? e.valueFrom])), {
      API_URL: 'http://video-video-voice-api-admin:80',
      ADMIN_TOKEN: { secretKeyRef: { name: 'video-voice-api', key: 'ADMIN_TOKEN' } },
    });
    assert.ok(!objs.some((o) => o.kind === 'Secret'), 'the chart makes no Secret');
    assert.ok(!objs.some((o) => o.kind === 'ScaledObject'));
  });

  test('the admin API on its own port and Service; NetworkPolicies for the API and the workers', () => {
    const objs = objects(render('minimal-values.yaml').stdout);
    const api = find(objs, 'Deployment', 'video-video-voice-api-api');
    assert.equal(envOf(api)['ADMIN_PORT'], '8081');
    assert.ok(container(api).ports.some((p: any) => p.name === 'admin' && p.containerPort === 8081));
    const customers = find(objs, 'Service', 'video-video-voice-api-api');
    assert.deepEqual(
      customers.spec.ports.map((p: any) => p.targetPort),
      ['http'],
      "the customers' Service has no admin port",
    );
    const admin = find(objs, 'Service', 'video-video-voice-api-admin');
    assert.equal(admin.spec.type, 'ClusterIP');
    assert.deepEqual(
      admin.spec.ports.map((p: any) => p.targetPort),
      ['admin'],
    );
    const apiPolicy = find(objs, 'NetworkPolicy', 'video-video-voice-api-api');
    assert.deepEqual(apiPolicy.spec.policyTypes, ['Ingress']);
    const adminRule = apiPolicy.spec.ingress.find((r: any) => r.ports.some((p: any) => p.port === 'admin'));
    assert.deepEqual(adminRule.from, [
      {
        podSelector: {
          matchLabels: {
            'app.kubernetes.io/name': 'video-voice-api',
            'app.kubernetes.io/instance': 'video',
            'app.kubernetes.io/component': 'ledger-audit',
          },
        },
      },
    ]);
    const workerPolicy = find(objs, 'NetworkPolicy', 'video-video-voice-api-worker');
    assert.deepEqual(workerPolicy.spec.ingress, [], 'nobody reaches a worker until networkPolicy.metricsFrom names its scraper');
    const monitoring = [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } }];
    const scraped = objects(
      render('minimal-values.yaml', ['--set-json', `networkPolicy.metricsFrom=${JSON.stringify(monitoring)}`]).stdout,
    );
    assert.deepEqual(find(scraped, 'NetworkPolicy', 'video-video-voice-api-worker').spec.ingress, [
      {
        ports: [
          { port: 'app-metrics', protocol: 'TCP' },
          { port: 'sdk-metrics', protocol: 'TCP' },
        ],
        from: monitoring,
      },
    ]);
    // api.adminPort=0: the admin API on the customers' port, as before; local storage: workers sign URLs.
    const shared = objects(
      render('minimal-values.yaml', [
        '--set',
        'api.adminPort=0',
        '--set',
        'storage.backend=local',
        '--set',
        'storage.local.existingClaim=videos',
      ]).stdout,
    );
    assert.equal(envOf(find(shared, 'Deployment', 'video-video-voice-api-api'))['ADMIN_PORT'], undefined);
    assert.ok(!shared.some((o) => o.kind === 'Service' && o.metadata.name === 'video-video-voice-api-admin'));
    const audit = find(shared, 'CronJob', 'video-video-voice-api-ledger-audit').spec.jobTemplate.spec.template.spec.containers[0];
    assert.equal(audit.env.find((e: any) => e.name === 'API_URL').value, 'http://video-video-voice-api-api:80');
    const localWorker = envOf(find(shared, 'Deployment', 'video-video-voice-api-worker'));
    assert.deepEqual(localWorker['URL_SIGNING_SECRET'], { secretKeyRef: { name: 'video-voice-api', key: 'URL_SIGNING_SECRET' } });
    assert.equal(localWorker['ADMIN_TOKEN'], undefined);
    // secrets.extra with processes: only those processes get it.
    const extra = objects(
      render('minimal-values.yaml', ['--set-json', 'secrets.extra=[{"env":"ELEVENLABS_API_KEY","key":"el","processes":["api"]}]']).stdout,
    );
    assert.ok(envOf(find(extra, 'Deployment', 'video-video-voice-api-api'))['ELEVENLABS_API_KEY']);
    assert.equal(envOf(find(extra, 'Deployment', 'video-video-voice-api-worker'))['ELEVENLABS_API_KEY'], undefined);
  });

  test('Temporal Cloud with an API key: TEMPORAL_TLS, TEMPORAL_API_KEY by reference, provider keys, models.yaml as a ConfigMap', () => {
    const objs = objects(render('temporal-cloud-api-key-values.yaml', ['--set-file', 'models.catalog=config/models.yaml']).stdout);
    const worker = find(objs, 'Deployment', 'video-video-voice-api-worker');
    const env = envOf(worker);
    assert.equal(env['TEMPORAL_ADDRESS'], 'eu-west-1.aws.api.temporal.io:7233');
    assert.equal(env['TEMPORAL_NAMESPACE'], 'video-prod.a1b2c');
    assert.equal(env['TEMPORAL_TLS'], 'true');
    assert.deepEqual(env['TEMPORAL_API_KEY'], { secretKeyRef: { name: 'temporal-cloud', key: 'api-key' } });
    assert.deepEqual(env['FAL_KEY'], { secretKeyRef: { name: 'video-providers', key: 'fal-key' } });
    assert.deepEqual(env['AWS_SECRET_ACCESS_KEY'], { secretKeyRef: { name: 'video-voice-api', key: 'AWS_SECRET_ACCESS_KEY' } });
    assert.deepEqual(env['METRICS_TOKEN'], { secretKeyRef: { name: 'video-voice-api', key: 'METRICS_TOKEN' } });
    assert.equal(env['VIDEO_JOB_TIMEOUT_MS'], '1800000', 'a whole number stays whole');
    assert.equal(env['MODELS_FILE'], '/etc/video-voice-api/models.yaml');
    assert.equal(env['OTEL_EXPORTER_OTLP_ENDPOINT'], 'http://otel-collector.observability:4318');
    assert.equal(env['OTEL_EXPORTER_OTLP_PROTOCOL'], 'http/protobuf');
    assert.equal(env['OTEL_TRACES_SAMPLER'], 'parentbased_traceidratio');
    assert.equal(env['OTEL_TRACES_SAMPLER_ARG'], '0.1');
    const cm = find(objs, 'ConfigMap', 'video-video-voice-api-models') as unknown as {
      metadata: { name: string };
      data: Record<string, string>;
    };
    // The file as given, which the service's own catalog parser accepts.
    assert.equal(cm.data['models.yaml']!.trimEnd(), fs.readFileSync('config/models.yaml', 'utf8').trimEnd());
    assert.ok(parseCatalog(cm.data['models.yaml']!, '/etc/video-voice-api/models.yaml'));
    assert.ok(worker.spec.template.spec.volumes.some((v: any) => v.configMap?.name === cm.metadata.name));
    assert.match(worker.spec.template.metadata.annotations['checksum/models'], /^[0-9a-f]{64}$/);
  });

  test('mTLS: the client certificate and CA mounted read-only, their paths in the standard variables', () => {
    const objs = objects(render('mtls-values.yaml').stdout);
    const api = find(objs, 'Deployment', 'video-video-voice-api-api');
    const env = envOf(api);
    assert.equal(env['TEMPORAL_TLS'], 'true');
    assert.equal(env['TEMPORAL_TLS_CLIENT_CERT_PATH'], '/etc/temporal-tls/tls.crt');
    assert.equal(env['TEMPORAL_TLS_CLIENT_KEY_PATH'], '/etc/temporal-tls/tls.key');
    assert.equal(env['TEMPORAL_TLS_SERVER_CA_CERT_PATH'], '/etc/temporal-tls/ca.crt');
    assert.equal(env['TEMPORAL_TLS_SERVER_NAME'], 'temporal-frontend.temporal.svc.cluster.local');
    assert.equal(env['TEMPORAL_API_KEY'], undefined);
    assert.ok(api.spec.template.spec.volumes.some((v: any) => v.secret?.secretName === 'temporal-client-tls'));
    assert.ok(container(api).volumeMounts.some((m: any) => m.mountPath === '/etc/temporal-tls' && m.readOnly));
    assert.equal(env['STORAGE_BACKEND'], 'local');
    assert.ok(
      api.spec.template.spec.volumes.some((v: any) => v.name === 'data' && v.persistentVolumeClaim?.claimName === 'video-voice-api-data'),
    );
    assert.equal(api.spec.replicas, 3);
    assert.ok(!objs.some((o) => o.kind === 'HorizontalPodAutoscaler'));
    assert.ok(api.spec.template.spec.volumes.some((v: any) => v.configMap?.name === 'video-models'));
  });

  test('KEDA: a ScaledObject on the task queue backlog with the workers own Temporal credentials', () => {
    const objs = objects(render('keda-values.yaml').stdout);
    const worker = find(objs, 'Deployment', 'video-video-voice-api-worker');
    assert.equal(worker.spec.replicas, undefined, 'KEDA owns the worker replica count');
    const so = find(objs, 'ScaledObject', 'video-video-voice-api-worker');
    assert.equal(so.spec.scaleTargetRef.name, worker.metadata.name);
    assert.equal(so.spec.maxReplicaCount, 30);
    const trigger = so.spec.triggers[0];
    assert.equal(trigger.type, 'temporal');
    assert.deepEqual(
      { endpoint: trigger.metadata.endpoint, namespace: trigger.metadata.namespace, taskQueue: trigger.metadata.taskQueue },
      { endpoint: 'video-prod.a1b2c.tmprl.cloud:7233', namespace: 'video-prod.a1b2c', taskQueue: 'video-voice-api' },
    );
    assert.deepEqual(
      so.spec.triggers.map((t: any) => t.metadata.taskQueue),
      ['video-voice-api', 'video-voice-api-webhooks'],
      'both queues a worker polls',
    );
    const auth = find(objs, 'TriggerAuthentication', trigger.authenticationRef.name);
    assert.deepEqual(
      auth.spec.secretTargetRef.map((r: any) => `${r.parameter}=${r.name}/${r.key}`),
      ['cert=temporal-cloud-client/tls.crt', 'key=temporal-cloud-client/tls.key'],
    );
  });
});

describe('a broken value fails', { skip: TOOLS_MISSING }, () => {
  test('an unknown field (a misspelt security context key) fails the strict check, naming it', () => {
    const r = render('minimal-values.yaml', ['--set', 'podSecurityContext.runAsNonRot=true']);
    assert.equal(r.status, 0, r.output);
    const v = runTool(validate, [], { input: r.stdout });
    assert.equal(v.status, 1);
    assert.match(v.output, /Deployment\/video-video-voice-api-api: .*unknown field "spec\.template\.spec\.securityContext\.runAsNonRot"/);
  });

  test('a wrong type (a port that is not a number) fails', () => {
    const r = render('minimal-values.yaml', ['--set-string', 'worker.appMetricsPort=metrics']);
    assert.equal(r.status, 0, r.output);
    const v = runTool(validate, [], { input: r.stdout });
    assert.equal(v.status, 1);
    assert.match(v.output, /Deployment\/video-video-voice-api-worker: .*containerPort/);
  });

  test('KEDA objects are checked too: an unknown ScaledObject field, a wrong type, an unknown trigger parameter', () => {
    const good = render('keda-values.yaml').stdout;
    for (const [from, to, message] of [
      ['  cooldownPeriod:', '  cooldownPeriods:', /unknown field "spec\.cooldownPeriods"/],
      ['  maxReplicaCount: 30', '  maxReplicaCount: thirty', /maxReplicaCount|cannot unmarshal/],
      ['        taskQueue:', '        taskqueue:', /metadata\.taskqueue is not a parameter of the temporal scaler/],
      ['    - parameter: cert', '    - parameter: certificate', /parameter "certificate" is not one of/],
    ] as const) {
      assert.ok(good.includes(from), from);
      const v = runTool(validate, [], { input: good.replace(from, to) });
      assert.equal(v.status, 1, `${to}: ${v.output}`);
      assert.match(v.output, message);
    }
  });

  test('a kind the check does not know fails rather than passing unchecked', () => {
    const v = runTool(validate, [], { input: 'apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n' });
    assert.equal(v.status, 1);
    assert.match(v.output, /not a type this check knows/);
  });
});

describe('docs/kubernetes.md, "Running on Kubernetes"', { skip: TOOLS_MISSING }, () => {
  test('its commands, run word for word (all but those that need a cluster), render objects that validate', () => {
    const page = fs.readFileSync('docs/kubernetes.md', 'utf8');
    const section = /^# Running on Kubernetes\n([\s\S]*?)(?=^## )/m.exec(page)?.[1];
    assert.ok(section, 'the page opens with the install commands, before its first section');
    const block = /```sh\n([\s\S]*?)```/.exec(section)?.[1];
    assert.ok(block, 'a sh block');
    // Lines joined where they continue (a trailing backslash); comments dropped.
    const commands = block
      .replace(/\\\n\s*/g, '')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l && !l.startsWith('#'));
    const needCluster = commands.filter((c) => c.startsWith('kubectl ') || c.startsWith('helm upgrade '));
    const offline = commands.filter((c) => !needCluster.includes(c));
    assert.ok(offline.some((c) => c.startsWith('helm lint ')) && offline.some((c) => c.startsWith('helm template ')), offline.join('\n'));
    assert.ok(
      needCluster.some((c) => c.startsWith('helm upgrade --install ')),
      'the install command',
    );
    // A directory standing for the repository's root, with helm on PATH.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'vva-readme-k8s-'));
    fs.symlinkSync(path.resolve('deploy'), path.join(dir, 'deploy'));
    fs.mkdirSync(path.join(dir, 'bin'));
    fs.symlinkSync(helm, path.join(dir, 'bin', 'helm'));
    for (const c of offline) {
      try {
        execFileSync('bash', ['-euo', 'pipefail', '-c', c], {
          cwd: dir,
          env: { ...process.env, PATH: `${path.join(dir, 'bin')}:${process.env['PATH']}` },
          stdio: ['ignore', 'pipe', 'pipe'],
        });
      } catch (err) {
        assert.fail(`${c}\n${(err as { stderr?: Buffer }).stderr?.toString()}`);
      }
    }
    const rendered = fs.readFileSync(path.join(dir, 'rendered.yaml'), 'utf8');
    const template = offline.find((c) => c.startsWith('helm template '))!;
    const v = runTool(validate, [], { input: rendered });
    assert.equal(v.status, 0, v.output);
    // The Secret the kubectl command creates holds every key the rendered objects take from it.
    const secretCommand = needCluster.find((c) => c.includes(' create secret generic '))!;
    const [, namespace, secretName] = /^kubectl -n (\S+) create secret generic (\S+) /.exec(secretCommand)!;
    assert.ok(template.includes(`--namespace ${namespace} `), template);
    const created = new Set([...secretCommand.matchAll(/--from-literal=([A-Z_]+)=/g)].map((m) => m[1]));
    const referenced = new Set(
      [...rendered.matchAll(/secretKeyRef:\s+name: (\S+)\s+key: (\S+)/g)].filter((m) => m[1] === secretName).map((m) => m[2]),
    );
    assert.deepEqual([...referenced].sort(), ['ADMIN_TOKEN', 'DATABASE_URL', 'URL_SIGNING_SECRET']);
    for (const key of referenced) assert.ok(created.has(key), `${key} is not created by: ${secretCommand}`);
    // The install command installs what was rendered: the same chart, release, namespace and values.
    const install = needCluster.find((c) => c.startsWith('helm upgrade --install '))!;
    const args = (c: string) =>
      c
        .replace(/ > \S+$/, '')
        .replace(/ --timeout \S+/, '')
        .split(' ')
        .filter((w) => !['helm', 'upgrade', '--install', 'template', '--wait'].includes(w));
    assert.deepEqual(args(install), args(template));
  });
});

describe("the migration Job's command (src/migrate-main.ts)", () => {
  test('applies every migration once, then finds the schema up to date; an unreachable database is one line, exit 1', async () => {
    const url = await createTestDatabase();
    const migrations = fs
      .readdirSync('src/db/migrations')
      .filter((f) => f.endsWith('.sql'))
      .sort();
    const run = (databaseUrl: string) =>
      runTool(process.execPath, ['--import', 'tsx', 'src/migrate-main.ts'], { env: { ...process.env, DATABASE_URL: databaseUrl } });
    const first = run(url);
    assert.equal(first.status, 0, first.output);
    assert.equal(first.output, `migrate: applied ${migrations.join(', ')}\n`);
    const again = run(url);
    assert.equal(again.status, 0, again.output);
    assert.equal(again.output, 'migrate: the schema is up to date\n');
    const down = run('postgresql://nobody:secret-password@127.0.0.1:1/none');
    assert.equal(down.status, 1);
    assert.match(down.output, /^migrate: cannot reach PostgreSQL at postgresql:\/\/nobody:\*\*\*@127\.0\.0\.1:1\/none: .*\n$/);
    assert.ok(!down.output.includes('secret-password'));
  });
});
