import js from '@eslint/js';
import prettier from 'eslint-config-prettier';
import tseslint from 'typescript-eslint';

// The layers: services -> domain -> plumbing. No arrow upward, no service importing another.
// Across modules, imports go through the package.json `imports` aliases (#domain/, #plumbing/);
// a relative import may not climb out of the module (or service) it is written in.
const layers = [
  { files: 'services/*', upward: 'services', why: 'a service must not import another service' },
  { files: 'shared/domain/*', upward: 'services', why: 'the domain must not import a service' },
  { files: 'shared/plumbing/*', upward: 'services|domain', why: 'the plumbing must not import the domain or a service' },
];
const layerRules = layers.flatMap(({ files, upward, why }) =>
  [1, 2, 3].map((depth) => ({
    files: [`${files}/${'*/'.repeat(depth - 1)}*.ts`],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { regex: `^#(${upward})/`, message: `Layers: ${why}.` },
            {
              regex: `^(\\.\\./){${depth},}`,
              message: 'Leave this module through an alias (#domain/..., #plumbing/...), not a relative path.',
            },
          ],
        },
      ],
    },
  })),
);

// The Kafka client is walled in: only shared/plumbing/kafka imports kafkajs, so replacing the client
// is a change to that folder. Everything else (services, domain, tests, benchmarks, infra) takes
// what it needs from #plumbing/kafka/..., the client's types from #plumbing/kafka/types.ts. A rule
// id of its own, so it adds to the layer rules above instead of replacing them for a file. The
// pattern also matches kafkajs's subpaths and packages named after it (which hand its types on).
const kafkaClient = '^kafkajs\\b';
const kafkaWall = 'The Kafka client stays behind shared/plumbing/kafka: import from #plumbing/kafka/... (its types: types.ts).';
const kafkaWallRules = {
  files: ['**/*.ts', '**/*.js'],
  ignores: ['shared/plumbing/kafka/**'],
  rules: {
    '@typescript-eslint/no-restricted-imports': ['error', { patterns: [{ regex: kafkaClient, message: kafkaWall }] }],
    // What the import rule does not see: import() in a type or an expression, and require().
    'no-restricted-syntax': [
      'error',
      ...[
        `TSImportType[source.value=/${kafkaClient}/]`,
        `ImportExpression[source.value=/${kafkaClient}/]`,
        `CallExpression[callee.name='require'][arguments.0.value=/${kafkaClient}/]`,
      ].map((selector) => ({ selector, message: kafkaWall })),
    ],
  },
};

export default tseslint.config(
  { ignores: ['node_modules/', '.cache/', 'dist/', '**/*.schema.json'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      'no-console': 'off',
    },
  },
  ...layerRules,
  kafkaWallRules,
  // Layout is prettier's (npm run lint runs both); no eslint rule argues with it.
  prettier,
  {
    files: ['**/*.test.ts', 'test/**/*.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off', '@typescript-eslint/no-non-null-assertion': 'off' },
  },
);
