/** What the HTTP app keeps per request (Hono context variables), shared by the API routes and MCP. */
export type AppEnv = {
  Variables: {
    /** X-Request-Id: the client's when it is a sane token, else a fresh UUID; in logs and error bodies. */
    requestId: string;
    /** The authenticated author, for the access log. */
    author?: string;
    /** The error code answered, for the access log. */
    errorCode?: string;
  };
};

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** The request id to use: a well-formed incoming X-Request-Id (so a proxy's id carries through), else a new one. */
export function requestIdFrom(header: string | undefined, fresh: () => string): string {
  return header !== undefined && REQUEST_ID.test(header) ? header : fresh();
}
