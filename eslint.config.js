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
  // Layout is prettier's (npm run lint runs both); no eslint rule argues with it.
  prettier,
  {
    files: ['**/*.test.ts', 'test/**/*.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off', '@typescript-eslint/no-non-null-assertion': 'off' },
  },
);
