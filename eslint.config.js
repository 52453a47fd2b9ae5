// ESLint: the recommended rules of ESLint and typescript-eslint over every TypeScript file of the
// project; formatting is Prettier's (.prettierrc.json), not ESLint's.
import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/**', 'dist/**', 'test/histories/**', 'deploy/**', 'console/dist/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { ...globals.node } },
    rules: {
      // An unused name is a mistake, except one spelled to be unused (`_x`) or a rest sibling that drops keys.
      '@typescript-eslint/no-unused-vars': [
        'error',
        {
          argsIgnorePattern: '^_',
          varsIgnorePattern: '^_',
          destructuredArrayIgnorePattern: '^_',
          ignoreRestSiblings: true,
          caughtErrors: 'none',
        },
      ],
    },
  },
  // At most 70 lines a function in the service and its activities (blank lines and comments aside), so each
  // reads on one screen. Not in workflows/: a workflow is one path read top to bottom, its nested steps
  // share the run's state and are counted with it; nor in the console's components, tests or tools.
  {
    files: ['src/**/*.ts', 'activities/**/*.ts'],
    rules: { 'max-lines-per-function': ['error', { max: 70, skipBlankLines: true, skipComments: true }] },
  },
  // Prettier wraps code at 140 characters but never a string or a comment: those are held to 160.
  { files: ['src/**/*.ts', 'activities/**/*.ts', 'workflows/**/*.ts'], rules: { 'max-len': ['error', { code: 160, ignoreUrls: true }] } },
  { files: ['console/src/**/*.{ts,tsx}'], languageOptions: { globals: { ...globals.browser } } },
  // Tests, the soak and the benchmark read answers of the service as untyped JSON and look into them.
  { files: ['test/**/*.ts', 'soak/**/*.ts', 'bench/**/*.ts'], rules: { '@typescript-eslint/no-explicit-any': 'off' } },
);
