/** The classes @kslate/langgraph ships (integrations/langgraph/classes), for the test gateway. */
import { readFileSync } from 'node:fs';
import { parseAllDocuments } from 'yaml';
import type { ClassInput } from '../setup/gateway.js';

export function langgraphClasses(subjects = ['apikey:alice', 'apikey:bob']): ClassInput[] {
  const text = readFileSync(new URL('../../integrations/langgraph/classes/langgraph.yaml', import.meta.url), 'utf8');
  return parseAllDocuments(text).map((d) => {
    const m = d.toJS();
    for (const r of Object.values(m.spec.roles) as { subjects: string[] }[]) r.subjects = subjects;
    return { name: m.metadata.name, namespace: m.metadata.namespace, spec: m.spec };
  });
}
