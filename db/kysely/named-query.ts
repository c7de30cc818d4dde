/**
 * A named prepared statement run through pg without a Describe after its first run.
 *
 * pg's own Query sends Parse (once per connection), Bind, Describe portal, Execute and Sync
 * for every run of a named statement, so the server answers every run with a RowDescription
 * and the driver parses it and builds the row parsers again (with normalising the query
 * config, ~9% of a get's gateway CPU in the profile). The description of a named statement
 * never changes while its text does not: the first run here describes it, keeps its column
 * names and parsers by name for its database (one map per pool), and later runs send only
 * Bind, Execute and Sync (plus Parse the first time on a connection). A row whose column
 * count differs from the kept description (a schema changed under a running process) drops
 * the description and fails the query with a clear error; the next run describes again.
 *
 * This is pg's documented "submittable" (an object with `submit(connection)` that the client
 * queues like a Query), written for the one case it serves: a named statement, no portal
 * paging, text results, one result set. Timeouts, the queue and errors stay the client's.
 */

/** What a row description contributes to a result: names and the text parser of each column. */
interface Shape {
  /** The statement text it describes: a name reused for another text is described anew. */
  text: string;
  names: string[];
  parsers: ((v: string) => unknown)[];
}

/** The part of pg's connection this uses (pg/lib/connection.js). */
interface PgConnection {
  stream: { cork?: () => void; uncork?: () => void };
  parsedStatements: Record<string, string>;
  submittedNamedStatements: Record<string, string>;
  parse(q: { text: string; name: string; types?: unknown[] }): void;
  bind(q: { portal: string; statement: string; values: unknown[]; binary: boolean; valueMapper?: unknown }): void;
  describe(q: { type: 'P'; name: string }): void;
  execute(q: { portal: string; rows?: number }): void;
  sync(): void;
  close(q: { type: 'S'; name: string }): void;
  sendCopyFail(msg: string): void;
}

export interface TypeParsers {
  getTypeParser(oid: number, format?: 'text' | 'binary'): (v: string) => unknown;
}

export interface NamedResult<R> {
  rows: R[];
  rowCount: number | null;
  command: string | null;
}

/** The descriptions of one database's statements, by name (one per pool: see runNamed). */
export type Shapes = Map<string, Shape>;

export class NamedQuery<R> {
  /** Read by pg's client: it tracks parsed statements by name and text. */
  readonly name: string;
  readonly text: string;
  readonly values: unknown[];
  readonly portal = '';
  binary = false;
  callback: ((err: Error | null, res?: NamedResult<R>) => void) | undefined = undefined;

  private shape: Shape | undefined;
  private readonly rows: R[] = [];
  private command: string | null = null;
  private rowCount: number | null = null;
  /** An error met while reading rows; reported when the server is ready again. */
  private failed: Error | null = null;

  constructor(
    name: string,
    text: string,
    values: unknown[],
    private readonly shapes: Shapes,
    private readonly types: TypeParsers,
    private readonly valueMapper: unknown,
  ) {
    this.name = name;
    this.text = text;
    this.values = values;
  }

  submit(connection: PgConnection): Error | null {
    const previous = connection.parsedStatements[this.name] ?? connection.submittedNamedStatements[this.name];
    if (previous !== undefined && previous !== this.text) {
      return new Error(`Prepared statements must be unique - '${this.name}' was used for a different statement`);
    }
    // Looked up now, not when made: a run queued behind the first one uses its description.
    const known = this.shapes.get(this.name);
    this.shape = known?.text === this.text ? known : undefined;
    connection.stream.cork?.();
    try {
      if (previous === undefined) {
        connection.parse({ text: this.text, name: this.name });
        connection.submittedNamedStatements[this.name] = this.text;
      }
      try {
        connection.bind({ portal: '', statement: this.name, values: this.values, binary: false, valueMapper: this.valueMapper });
      } catch (e) {
        // As pg's Query: a value that cannot be sent closes the statement and ends the turn.
        connection.close({ type: 'S', name: this.name });
        connection.sync();
        this.handleError(e as Error);
        return null;
      }
      if (this.shape === undefined) connection.describe({ type: 'P', name: '' });
      connection.execute({ portal: '' });
      connection.sync();
    } finally {
      connection.stream.uncork?.();
    }
    return null;
  }

  handleRowDescription(msg: { fields: { name: string; dataTypeID: number; format?: string }[] }): void {
    const shape: Shape = {
      text: this.text,
      names: msg.fields.map((f) => f.name),
      parsers: msg.fields.map((f) => this.types.getTypeParser(f.dataTypeID, 'text')),
    };
    this.shape = shape;
    this.shapes.set(this.name, shape);
  }

  handleDataRow(msg: { fields: (string | null)[] }): void {
    if (this.failed !== null) return;
    const shape = this.shape;
    const raw = msg.fields;
    if (shape === undefined || raw.length !== shape.names.length) {
      this.shapes.delete(this.name);
      this.failed = new Error(
        `statement ${this.name}: the server sent ${raw.length} columns, ${shape ? `not the ${shape.names.length} described before` : 'without a description'}; retry (the next run describes it again)`,
      );
      return;
    }
    const row: Record<string, unknown> = {};
    try {
      for (let i = 0; i < raw.length; i++) {
        const v = raw[i];
        row[shape.names[i]!] = v === null || v === undefined ? null : shape.parsers[i]!(v);
      }
    } catch (e) {
      this.failed = e as Error;
      return;
    }
    this.rows.push(row as R);
  }

  handleCommandComplete(msg: { text?: string; command?: string }): void {
    const m = /^([A-Za-z]+)(?: (\d+))?(?: (\d+))?/.exec(msg.text ?? msg.command ?? '');
    if (m) {
      this.command = m[1]!;
      const n = m[3] ?? m[2];
      if (n !== undefined) this.rowCount = Number(n);
    }
  }

  handleEmptyQuery(): void {}

  handlePortalSuspended(): void {}

  handleCopyInResponse(connection: PgConnection): void {
    connection.sendCopyFail('No source stream defined');
  }

  handleCopyData(): void {}

  handleError(err: Error): void {
    const e = this.failed ?? err;
    this.failed = null;
    const cb = this.callback;
    this.callback = undefined;
    cb?.(e);
  }

  handleReadyForQuery(): void {
    const cb = this.callback;
    if (cb === undefined) return;
    this.callback = undefined;
    if (this.failed !== null) cb(this.failed);
    else cb(null, { rows: this.rows, rowCount: this.rowCount, command: this.command });
  }
}
