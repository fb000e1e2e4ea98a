// The dashboard's build (docs/dashboard.md "Build"): plain Vite with esbuild's JSX transform for
// Preact, no plugins. The output goes to dist/ beside this file (under CMake: the build
// directory's copy of web/), where tools/embed.mjs turns it into a C++ source file.
import { defineConfig } from 'vite';

export default defineConfig({
  esbuild: { jsx: 'automatic', jsxImportSource: 'preact' },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2020',
    // Every file is served by the binary with its own ETag; nothing is inlined as a data: URI
    // (the page's Content-Security-Policy allows only files from the server itself).
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    reportCompressedSize: false,
    sourcemap: false,
  },
});
