// The alert rules (deploy/prometheus/alerts.yaml) pass promtool's checks and their unit tests
// (alerts.test.yaml), those tests can fail (a changed threshold fails them), every alert has a test
// in which it fires, and every query of the Grafana dashboard is valid PromQL. That each series
// named is one the service exports is test/platform/operator-metrics.test.ts's part (it needs a running stack).
import { before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import YAML from 'yaml';
import { goToolsMissing, runTool, toolPath } from '../helpers/tools.js';

const RULES = 'deploy/prometheus/alerts.yaml';
const RULE_TESTS = 'deploy/prometheus/alerts.test.yaml';
const DASHBOARD = 'deploy/grafana/video-voice-api.json';

/** Without promtool (and no Go to build it) these tests skip, saying why. */
const TOOLS_MISSING = goToolsMissing(['PROMTOOL_PATH'], 'promtool');
let promtool: string;
before(() => {
  if (TOOLS_MISSING) return;
  promtool = toolPath('PROMTOOL_PATH', 'scripts/install-promtool.sh');
});

interface Rule {
  alert: string;
  expr: string;
}
const rules = (): Rule[] => (YAML.parse(fs.readFileSync(RULES, 'utf8')) as { groups: { rules: Rule[] }[] }).groups.flatMap((g) => g.rules);

/** A copy of deploy/prometheus with `edit` applied to the rules, for tests that must fail. */
function editedCopy(edit: (rulesText: string) => string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'vva-rules-'));
  fs.writeFileSync(path.join(dir, 'alerts.yaml'), edit(fs.readFileSync(RULES, 'utf8')));
  fs.copyFileSync(RULE_TESTS, path.join(dir, 'alerts.test.yaml'));
  return dir;
}

describe('Prometheus alert rules', { skip: TOOLS_MISSING }, () => {
  test('promtool check rules: valid, every rule counted', () => {
    const r = runTool(promtool, ['check', 'rules', RULES]);
    assert.equal(r.status, 0, r.output);
    assert.match(r.output, new RegExp(`SUCCESS: ${rules().length} rules found`));
  });

  test('promtool test rules: every unit test passes', () => {
    const r = runTool(promtool, ['test', 'rules', RULE_TESTS]);
    assert.equal(r.status, 0, r.output);
    assert.match(r.output, /SUCCESS/);
  });

  test('the unit tests fail when a rule changes (a threshold raised, an expression broken)', () => {
    const raised = editedCopy((t) =>
      t.replace('expr: max(video_jobs_pending_past_deadline{}) > 0', 'expr: max(video_jobs_pending_past_deadline{}) > 5'),
    );
    const r = runTool(promtool, ['test', 'rules', path.join(raised, 'alerts.test.yaml')]);
    assert.notEqual(r.status, 0, r.output);
    assert.match(r.output, /VideoJobsPendingPastDeadline/);

    const broken = editedCopy((t) =>
      t.replace(
        'sum by (backend, operation) (rate(video_provider_errors_total{}[10m]))',
        'sum by (backend, operation) (rate(video_provider_errors_total{}[10m])',
      ),
    );
    const c = runTool(promtool, ['check', 'rules', path.join(broken, 'alerts.yaml')]);
    assert.notEqual(c.status, 0, c.output);
  });

  test('every alert fires in at least one unit test', () => {
    const tests = YAML.parse(fs.readFileSync(RULE_TESTS, 'utf8')) as {
      tests: { alert_rule_test?: { alertname: string; exp_alerts: unknown[] }[] }[];
    };
    const fired = new Set(
      tests.tests.flatMap((t) => (t.alert_rule_test ?? []).filter((a) => a.exp_alerts.length > 0).map((a) => a.alertname)),
    );
    const untested = rules()
      .map((r) => r.alert)
      .filter((a) => !fired.has(a));
    assert.deepEqual(untested, []);
  });
});

describe('Grafana dashboard', { skip: TOOLS_MISSING }, () => {
  test('is a dashboard whose every query is valid PromQL (checked by promtool as recording rules)', () => {
    const dashboard = JSON.parse(fs.readFileSync(DASHBOARD, 'utf8')) as {
      uid: string;
      panels: { type: string; targets?: { expr: string }[] }[];
    };
    assert.equal(dashboard.uid, 'video-voice-api');
    const exprs = dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr));
    assert.ok(exprs.length >= 20, `${exprs.length} queries`);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'vva-dashboard-'));
    const file = path.join(dir, 'dashboard-queries.yaml');
    fs.writeFileSync(
      file,
      YAML.stringify({ groups: [{ name: 'dashboard', rules: exprs.map((expr, i) => ({ record: `dashboard:query_${i}`, expr })) }] }),
    );
    const r = runTool(promtool, ['check', 'rules', file]);
    assert.equal(r.status, 0, r.output);
    assert.match(r.output, new RegExp(`SUCCESS: ${exprs.length} rules found`));
  });
});
