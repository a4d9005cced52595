from configparser import ConfigParser
import os, setuptools

cfg = ConfigParser(delimiters=['='])
cfg.read('settings.ini', encoding='utf-8')
cfg = cfg['DEFAULT']
req = lambda key: cfg.get(key, '').split()
# one extra per paper (settings.ini `extra_<paper>`, empty where the base is enough), named after the paper
papers = {k[len('extra_'):]: req(k) for k in cfg if k.startswith('extra_')}
union = lambda *lists: sorted({r for l in lists for r in l}, key=str.lower)
# `all`: every paper's peers, except netformer's neurogym (it pins numpy==2.2.* and gymnasium; install it on its own)
everything = union(*(v for k, v in papers.items() if k != 'netformer'))
# what the `iclr25 serve` pages need beyond the base: every paper extra but the local LLM (space falls back without it)
# and neurogym (netformer's default task needs none)
pages = union(*(v for k, v in papers.items() if k not in ('netformer', 'space')))
extras = {**papers, 'all': everything, 'widgets': req('widgets_requirements'), 'llm': req('llm_requirements'),
          'test': req('test_requirements'), 'bench': req('bench_requirements'),
          # the README's first command: the tools (nbdev, JupyterLab, tests, docs), the ipywidgets route, every page
          'dev': union(req('dev_requirements'), req('widgets_requirements'), pages),
          # older name, kept for existing commands: every paper's peers plus the tests' peers
          'peers': union(everything, req('test_requirements'))}
setuptools.setup(
    name=cfg['lib_name'], version=cfg['version'], description=cfg['description'],
    author=cfg['author'], author_email=cfg['author_email'], url=cfg['git_url'],
    keywords=cfg['keywords'].split(),
    license={'apache2': 'Apache Software License 2.0'}.get(cfg['license'], cfg['license']),
    packages=setuptools.find_packages(include=[cfg['lib_path'], cfg['lib_path'] + '.*']),
    include_package_data=True, zip_safe=False, python_requires='>=' + cfg['min_python'],
    install_requires=cfg.get('requirements', '').split(),
    extras_require=extras,
    long_description=open('README.md', encoding='utf-8').read() if os.path.exists('README.md') else '',
    long_description_content_type='text/markdown',
    classifiers=['Programming Language :: Python :: 3', 'Development Status :: 2 - Pre-Alpha',
                 'Intended Audience :: Science/Research'],
    project_urls={'Repository': cfg['git_url'], 'Documentation': cfg['doc_host'] + cfg['doc_baseurl']},
    entry_points={'nbdev': [f"{cfg['lib_path']}={cfg['lib_path']}._modidx:d"],
                  'console_scripts': cfg.get('console_scripts', '').split()},
)
