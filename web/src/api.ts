// The one way the dashboard talks to the server: JSON over /api/v1, same origin, the sign-in
// session cookie (HttpOnly) going along by itself. Errors arrive as RFC 9457 problem JSON whose
// `code` (and `field`, where the server names one) the forms use to put the message beside the
// field it concerns.

export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly field: string | undefined;
  readonly problem: Record<string, unknown>;

  constructor(status: number, problem: Record<string, unknown>) {
    const detail = typeof problem.detail === 'string' && problem.detail ? problem.detail : '';
    super(detail || `The server answered ${status}.`);
    this.status = status;
    this.code = typeof problem.code === 'string' ? problem.code : `http_${status}`;
    this.field = typeof problem.field === 'string' ? problem.field : undefined;
    this.problem = problem;
  }
}

/** Called when a request that needed a sign-in answered 401: the app goes to the sign-in page. */
let onSignedOut: () => void = () => {};
export function setSignedOutHandler(handler: () => void): void {
  onSignedOut = handler;
}

export async function api<T>(method: string, path: string, body?: unknown): Promise<T> {
  let response: Response;
  try {
    response = await fetch(path, {
      method,
      credentials: 'same-origin',
      headers: body === undefined ? {} : { 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch {
    throw new ApiError(0, {
      code: 'network_error',
      detail: 'The server could not be reached. Check the connection and try again.',
    });
  }
  if (response.status === 204) return undefined as T;
  const text = await response.text();
  let data: unknown = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!response.ok) {
    const problem = data && typeof data === 'object' ? (data as Record<string, unknown>) : {};
    const error = new ApiError(response.status, problem);
    if (response.status === 401 && !path.startsWith('/api/v1/auth/')) onSignedOut();
    throw error;
  }
  return data as T;
}

/** The message to show for an error of any kind. */
export function messageOf(error: unknown): string {
  if (error instanceof Error) return error.message;
  return String(error);
}
