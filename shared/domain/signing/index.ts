export {
  decodeStandardSecret,
  parseSignedTimestamp,
  SIGNATURE_HEADERS,
  SIGNATURE_SCHEMES,
  signingKey,
  TIMESTAMP_FORMS,
} from './schemes.ts';
export type { SignatureHeaderNames, SignatureScheme } from './schemes.ts';
export { signWebhook } from './sign-webhook.ts';
export type { SignWebhookInput, WebhookHeaders } from './sign-webhook.ts';
export { verifySignature } from './verify-signature.ts';
export type { SignatureFailureReason, SigningSecret, VerifySignatureInput, VerifySignatureResult } from './verify-signature.ts';
